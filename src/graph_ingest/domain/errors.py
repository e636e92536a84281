"""Errors raised by pure domain logic."""

from graph_ingest.domain.status import StatusCode
from graph_ingest.errors import GraphIngestError


class DomainError(GraphIngestError):
    code = StatusCode.INVALID_ARGUMENT


class InvalidIdentifier(DomainError):
    """A label, edge type, property name or space that could not be safely put into Cypher."""


class InvalidPlan(DomainError):
    """A plan whose content is inconsistent (revisions, document, mutation vs next state)."""


class FingerprintMismatch(DomainError):
    """The plan's bytes do not match the fingerprint it carries: it was altered after freezing."""

    code = StatusCode.DATA_LOSS


class IllegalTransition(DomainError):
    code = StatusCode.FAILED_PRECONDITION

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"illegal operation stage transition {current} -> {target}")
        self.current = current
        self.target = target


class OperationBindingMismatch(DomainError):
    """One operation_id binds exactly one plan; this one names a different plan."""

    code = StatusCode.ALREADY_EXISTS
