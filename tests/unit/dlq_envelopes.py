"""DLQ envelopes for the tests: a realistic one, and attempt records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from graph_ingest.domain.dlq import AttemptRecord, DlqEnvelope, MessageHeader
from graph_ingest.domain.error_detail import ErrorContext, ErrorDetail, RetryAdvice, RetryStrategy
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode

AT = datetime(2026, 3, 24, 10, 30, 1, 250_000, tzinfo=UTC)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def failure(message: str = "commit conflict", code: StatusCode = StatusCode.ABORTED) -> ErrorDetail:
    return ErrorDetail.create(
        trace_id=TRACE_ID,
        code=code,
        error_class="SerializationFailure",
        message=message,
        context=ErrorContext(
            topic="ingestion.plans",
            partition=3,
            offset=12_847,
            stage=Stage.PREPARED,
            worker_id="applier-7",
            code_version="0.1.0",
        ),
        retry=RetryAdvice(retryable=False, attempts_left=0, strategy=RetryStrategy.DEAD_LETTER),
    )


def attempt(
    number: int, *, tier: int | None = None, message: str = "commit conflict"
) -> AttemptRecord:
    return AttemptRecord.of(
        failure(message), attempt=number, tier=tier, at=AT + timedelta(seconds=number)
    )


def envelope(**overrides: Any) -> DlqEnvelope:
    fields: dict[str, Any] = {
        "original_topic": "ingestion.plans",
        "original_partition": 3,
        "original_offset": 12_847,
        "original_key": b"research/doc-42",
        "original_value": b"\xc3\x01 frozen plan bytes",
        "original_headers": (
            MessageHeader(key="operation_id", value=b"op-1"),
            MessageHeader(key="traceparent", value=f"00-{TRACE_ID}-b7ad6b7169203331-01".encode()),
        ),
        "operation_id": "op-1",
        "fingerprint": "v1:" + "ab" * 32,
        "attempts": (attempt(1), attempt(2, tier=0), attempt(3, tier=1), attempt(4, tier=2)),
        "dead_lettered_at": AT + timedelta(seconds=36),
    }
    return DlqEnvelope(**{**fields, **overrides})
