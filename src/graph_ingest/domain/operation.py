"""The operation record: how far one plan has come. Its snapshot is the operation-log event."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from graph_ingest.domain.limits import (
    MAX_ERROR_CLASS_LENGTH,
    MAX_ERROR_MESSAGE_LENGTH,
    bounded_text,
)
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.stages import Stage, check_transition
from graph_ingest.domain.status import StatusCode


class ErrorInfo(FrozenModel):
    code: StatusCode
    error_class: str
    message: str

    @classmethod
    def quoting(cls, code: StatusCode, error_class: str, message: str) -> ErrorInfo:
        """What an error says about itself, bounded and storable: recording a failure must not
        fail (or flood a header, a row, a log line) because of what the error quotes."""
        return cls(
            code=code,
            error_class=bounded_text(error_class, MAX_ERROR_CLASS_LENGTH),
            message=bounded_text(message, MAX_ERROR_MESSAGE_LENGTH),
        )


class Operation(FrozenModel):
    operation_id: str
    space: str
    document_id: str
    expected_revision: int
    fingerprint: str
    stage: Stage
    sequence: int = Field(ge=1, description="bumped on every change; consumers de-duplicate by it")
    attempts: int = 0
    last_error: ErrorInfo | None = None
    stage_times: dict[Stage, datetime] = Field(default_factory=dict)
    next_retry_at: datetime | None = None
    dlq_id: str | None = None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def prepared(
        cls,
        *,
        operation_id: str,
        space: str,
        document_id: str,
        expected_revision: int,
        fingerprint: str,
        at: datetime,
    ) -> Operation:
        return cls(
            operation_id=operation_id,
            space=space,
            document_id=document_id,
            expected_revision=expected_revision,
            fingerprint=fingerprint,
            stage=Stage.PREPARED,
            sequence=1,
            stage_times={Stage.PREPARED: at},
            created_at=at,
            updated_at=at,
        )

    def transition(self, target: Stage, at: datetime, error: ErrorInfo | None = None) -> Operation:
        """Return the operation moved to ``target``; raise IllegalTransition if that is not legal."""
        check_transition(self.stage, target)
        return self.model_copy(
            update={
                "stage": target,
                "sequence": self.sequence + 1,
                "attempts": self.attempts + (1 if target is Stage.FAILED else 0),
                "last_error": error if error is not None else self.last_error,
                "stage_times": {**self.stage_times, target: at},
                "updated_at": at,
            }
        )

    def with_error(self, error: ErrorInfo, at: datetime) -> Operation:
        """Record a failed attempt without changing the stage."""
        return self.model_copy(
            update={
                "sequence": self.sequence + 1,
                "attempts": self.attempts + 1,
                "last_error": error,
                "updated_at": at,
            }
        )
