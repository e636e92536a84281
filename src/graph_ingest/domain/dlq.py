"""The DLQ envelope: a message that left the retry ladder, with everything needed to review it.

The original message is kept byte for byte (key, value and headers may be anything, not even
UTF-8: a plan that could not be decoded is exactly what the DLQ must keep). The attempt history
is bounded: past :data:`MAX_ATTEMPT_HISTORY` attempts, the oldest after the first are folded into
``folded_attempts``, so an envelope replayed and failed again and again stays small while it still
shows how it started and how it has been failing lately.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from itertools import pairwise

from pydantic import ConfigDict, Field, model_validator

from graph_ingest.domain.error_detail import ErrorDetail
from graph_ingest.domain.limits import ErrorClass, ErrorMessage, Offset, StoredId, StoredText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import TraceId

MAX_ATTEMPT_HISTORY = 20

# Raw bytes as base64 in JSON (the CLI's --json), since they need not be UTF-8.
_BYTES_AS_BASE64 = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")


class DlqStatus(StrEnum):
    PENDING_REVIEW = "PENDING_REVIEW"
    REPLAYED = "REPLAYED"
    RESOLVED = "RESOLVED"


class AttemptRecord(FrozenModel):
    attempt: int = Field(ge=1)
    tier: int | None = Field(
        default=None, ge=0, description="retry tier index; None on the main topic or a replay"
    )
    at: datetime
    code: StatusCode
    error_class: ErrorClass
    message: ErrorMessage
    worker_id: StoredText
    code_version: StoredText
    trace_id: TraceId

    @classmethod
    def of(
        cls, detail: ErrorDetail, *, attempt: int, tier: int | None, at: datetime
    ) -> AttemptRecord:
        return cls(
            attempt=attempt,
            tier=tier,
            at=at,
            code=detail.code,
            error_class=detail.error_class,
            message=detail.message,
            worker_id=detail.context.worker_id,
            code_version=detail.context.code_version,
            trace_id=detail.trace_id,
        )


class MessageHeader(FrozenModel):
    model_config = FrozenModel.model_config | _BYTES_AS_BASE64

    key: str
    value: bytes | None


def append_attempt(
    attempts: tuple[AttemptRecord, ...],
    folded: int,
    record: AttemptRecord,
    limit: int = MAX_ATTEMPT_HISTORY,
) -> tuple[tuple[AttemptRecord, ...], int]:
    """The history with ``record`` appended, and the new folded count: past ``limit`` records the
    first is kept, then the latest ``limit - 1``; those dropped between them are counted."""
    if limit < 2:
        raise ValueError(f"an attempt history keeps the first and the latest: limit {limit} < 2")
    history = (*attempts, record)
    if len(history) <= limit:
        return history, folded
    dropped = len(history) - limit
    return (history[0], *history[1 + dropped :]), folded + dropped


class DlqEnvelope(FrozenModel):
    model_config = FrozenModel.model_config | _BYTES_AS_BASE64

    original_topic: str = Field(min_length=1)
    original_partition: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="None for a plan that followed another"
    )
    original_offset: Offset | None = None
    original_key: bytes | None
    original_value: bytes | None
    original_headers: tuple[MessageHeader, ...] = ()
    operation_id: StoredId | None = None
    fingerprint: StoredId | None = None
    attempts: tuple[AttemptRecord, ...] = Field(min_length=1, max_length=MAX_ATTEMPT_HISTORY)
    folded_attempts: int = Field(default=0, ge=0)
    dead_lettered_at: datetime
    status: DlqStatus = DlqStatus.PENDING_REVIEW
    parked_behind: StoredId | None = Field(
        default=None,
        description="the operation this plan waited behind and followed to the DLQ; replaying "
        "that one releases this one when it completes",
    )
    note: StoredText | None = Field(
        default=None, description="why the status last changed (a purge's reason, a replay)"
    )

    @model_validator(mode="after")
    def _attempts_in_order(self) -> DlqEnvelope:
        numbers = [a.attempt for a in self.attempts]
        if any(later <= earlier for earlier, later in pairwise(numbers)):
            raise ValueError(f"attempt numbers must increase: {numbers}")
        return self

    @property
    def total_attempts(self) -> int:
        return len(self.attempts) + self.folded_attempts

    def with_status(self, status: DlqStatus, note: str) -> DlqEnvelope:
        return self.model_copy(update={"status": status, "note": note})

    def with_attempt(self, record: AttemptRecord) -> DlqEnvelope:
        """The envelope with one more attempt in its bounded history (a replay failed again)."""
        attempts, folded = append_attempt(self.attempts, self.folded_attempts, record)
        return DlqEnvelope.model_validate(
            {**self.model_dump(), "attempts": attempts, "folded_attempts": folded}
        )

    def failed_again(self, record: AttemptRecord, *, uncounted: int = 0) -> DlqEnvelope:
        """The envelope of an entry whose replay failed again: ``record`` appended (after
        ``uncounted`` attempts of that delivery only counted), PENDING_REVIEW again, dead-lettered
        at ``record``'s time; where it first came from is kept."""
        extended = self.with_attempt(record)
        return extended.model_copy(
            update={
                "folded_attempts": extended.folded_attempts + uncounted,
                "dead_lettered_at": record.at,
                "status": DlqStatus.PENDING_REVIEW,
                "note": None,
            }
        )
