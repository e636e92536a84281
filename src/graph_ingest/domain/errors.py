"""The package's one exception root, and the errors raised by pure domain logic. Subpackages raise
subclasses of :class:`GraphIngestError`; adapters translate driver errors into them."""

from graph_ingest.domain.status import StatusCode


class GraphIngestError(Exception):
    """Root of every error graph-ingest raises on purpose; carries a status code."""

    code: StatusCode = StatusCode.INTERNAL
    dependency: str | None = None
    """The backing service an adapter's error is about ("postgres", "neo4j", "kafka"), if any."""

    def __init__(self, message: str, *, code: StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class ConfigurationError(GraphIngestError):
    code = StatusCode.FAILED_PRECONDITION


class DependencyUnavailable(GraphIngestError):
    """A backing service (Kafka, Neo4j, PostgreSQL) could not be reached or timed out."""

    code = StatusCode.UNAVAILABLE


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
