"""A consumed plan message: where it came from, its raw bytes, and the decoded plan or why not."""

from __future__ import annotations

from dataclasses import dataclass

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.headers import RetryHeaders
from graph_ingest.schemas.claim_check import ClaimReference
from graph_ingest.schemas.codec import decode_plan

MessageHeaders = tuple[tuple[str, bytes | None], ...]


def verified_plan(data: bytes) -> IngestionPlan:
    """Decode a frozen plan and verify its fingerprint; GraphIngestError for any failure.

    Third-party code (fastavro, pydantic, the RFC 8785 canonicaliser) raises its own exceptions on
    hostile input: every one of them becomes INVALID_ARGUMENT, so the plan is poison, not the
    worker's death."""
    try:
        plan = decode_plan(data)
        plan.verify_fingerprint()
    except GraphIngestError:
        raise
    except Exception as exc:
        raise GraphIngestError(
            f"plan cannot be verified: {type(exc).__name__}: {exc}",
            code=StatusCode.INVALID_ARGUMENT,
        ) from exc
    return plan


@dataclass(frozen=True, slots=True)
class PlanMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    plan: IngestionPlan | None = None
    error: GraphIngestError | None = None
    operation_id_header: str | None = None
    headers: MessageHeaders = ()
    retry: RetryHeaders | None = None
    """What a retry-tier copy says about its journey; None on the main topic."""
    claim: ClaimReference | None = None
    """The claim-check reference the message carried instead of the plan; ``value`` is the
    stored plan once resolved (``consumers.applier.claims``), ``claim_value`` the message's own value."""
    claim_value: bytes | None = None

    @property
    def wire_value(self) -> bytes | None:
        """The value as it was on the topic: what a retry-tier or DLQ copy carries."""
        return self.claim_value if self.claim is not None else self.value

    @property
    def position(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def context(self) -> str:
        """The fixed log prefix: topic[partition]@offset op=<id>."""
        op = self.plan.operation_id if self.plan else self.operation_id_header
        return f"{self.topic}[{self.partition}]@{self.offset} op={op}"
