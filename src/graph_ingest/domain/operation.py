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
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage, check_transition
from graph_ingest.domain.status import StatusCode


class ErrorInfo(FrozenModel):
    code: StatusCode
    error_class: str
    message: str
    error_id: str | None = Field(
        default=None, description="the failure event's id (its failure record); None if unrecorded"
    )
    trace_id: str | None = Field(default=None, description="the trace of the plan's journey")

    @classmethod
    def quoting(cls, code: StatusCode, error_class: str, message: str) -> ErrorInfo:
        """What an error says about itself, bounded and storable: recording a failure must not
        fail (or flood a header, a row, a log line) because of what the error quotes."""
        return cls(
            code=code,
            error_class=bounded_text(error_class, MAX_ERROR_CLASS_LENGTH),
            message=bounded_text(message, MAX_ERROR_MESSAGE_LENGTH),
        )


MAX_OUTAGE_WAITS = 20
"""The outage waits an operation keeps (the latest): a plan held through a flapping service must
not grow its every snapshot without bound."""

_BEHIND_A_LEADER = frozenset({Stage.PARKED, Stage.DEAD_LETTERED})


class OutageWait(FrozenModel):
    """An outage the applier waited out in place, this operation's plan held meanwhile: no
    attempt was spent, so without this record the wait would leave no trace."""

    dependency: str
    started_at: datetime
    ended_at: datetime


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
    plan_kind: PlanKind | None = Field(default=None, description="None in operation.v1 events")
    submission_id: str | None = None
    document_version: str | None = Field(
        default=None, description="the version its plan makes; None in events that do not say"
    )
    retry_tier: int | None = Field(
        default=None, ge=0, description="the tier index of the retry that runs next"
    )
    parked_behind: str | None = Field(
        default=None, description="while PARKED: the operation this one waits behind"
    )
    waits: tuple[OutageWait, ...] = ()

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
        plan_kind: PlanKind | None = None,
        submission_id: str | None = None,
        document_version: str | None = None,
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
            plan_kind=plan_kind,
            submission_id=submission_id,
            document_version=document_version,
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
                # a follower dead-lettered behind its leader still waits for it (released when
                # the leader completes); any other stage waits behind nothing
                "parked_behind": self.parked_behind if target in _BEHIND_A_LEADER else None,
                "retry_tier": self.retry_tier if target is Stage.FAILED else None,
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

    def having_waited(self, waits: tuple[OutageWait, ...]) -> Operation:
        """The snapshot with ``waits`` recorded too, the latest ``MAX_OUTAGE_WAITS`` kept (no new
        sequence: it rides on the next change)."""
        if not waits:
            return self
        return self.model_copy(update={"waits": (*self.waits, *waits)[-MAX_OUTAGE_WAITS:]})
