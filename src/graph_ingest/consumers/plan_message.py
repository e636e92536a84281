"""A consumed plan message: where it came from, its raw bytes, and the decoded plan or why not;
and :func:`decode_message`, the decoder the applier's consumer (``kafka.consumer``) runs on each
message it fetches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import RetryRead
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import ClaimReference, parse_claim_reference
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.schemas.errors import MalformedHeader
from graph_ingest.schemas.headers import MessageHeaders, RetryHeaders


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
    timestamp_s: float | None = None
    """The message's Kafka timestamp (unix seconds; when it was published), if it has one."""

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

    def log_fields(self) -> dict[str, str]:
        """What a log record about this message carries (``extra=``; JSON log lines show them):
        its operation id and trace id, those it has."""
        fields = {}
        if op := self.plan.operation_id if self.plan else self.operation_id_header:
            fields["operation_id"] = op
        if trace_id := kafka_headers.trace_id_from_headers(self.headers):
            fields["trace_id"] = trace_id
        return fields


def _timestamp_s(message: Message) -> float | None:
    kind, ms = message.timestamp()
    return ms / 1000 if kind != TIMESTAMP_NOT_AVAILABLE and ms > 0 else None


def decode_message(
    message: Message, headers: MessageHeaders, retry: RetryRead, *, max_plan_bytes: int
) -> PlanMessage:
    """Decode and verify one plan message (its headers and retry headers already read); any
    failure is kept on the message, never raised (``verified_plan``)."""
    op_header = kafka_headers.header_value(headers, kafka_headers.OPERATION_ID)
    position: dict[str, Any] = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "key": message.key(),
        "value": message.value(),
        "headers": headers,
        "timestamp_s": _timestamp_s(message),
        "operation_id_header": (
            None if op_header is None else op_header.decode("utf-8", "replace")
        ),
    }
    value = message.value()
    if not value:
        error = GraphIngestError("empty plan message", code=StatusCode.INVALID_ARGUMENT)
        return PlanMessage(**position, error=error)
    if len(value) > max_plan_bytes:
        error = GraphIngestError(
            f"plan message of {len(value)} bytes exceeds the limit of {max_plan_bytes} "
            "(APPLIER__MAX_PLAN_BYTES): split the document or raise the limit",
            code=StatusCode.INVALID_ARGUMENT,
        )
        return PlanMessage(**position, error=error)
    if isinstance(retry, MalformedHeader):
        return PlanMessage(**position, error=retry)
    position["retry"] = retry
    try:
        if kafka_headers.header_value(headers, kafka_headers.CLAIM_CHECK) is not None:
            # The plan is in PostgreSQL: consumers.applier.claims resolves and verifies it.
            claim = parse_claim_reference(value)
            return PlanMessage(**{**position, "value": None}, claim=claim, claim_value=value)
        plan = verified_plan(value)
    except GraphIngestError as exc:
        return PlanMessage(**position, error=exc)
    return PlanMessage(**position, plan=plan)


__all__ = ["PlanMessage", "decode_message", "verified_plan"]
