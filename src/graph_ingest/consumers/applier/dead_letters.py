"""What routing writes of a plan that failed (``routing``, ``followers``): the error detail of an
attempt, the operation moved to FAILED or DEAD_LETTERED, and a DLQ entry with its DLQ-topic
message — shared by the router of a failed plan and the followers dead-lettered behind it, so
both record a failure the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph_ingest import __version__
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.dlq.entries import entry_of
from graph_ingest.domain.dlq import AttemptRecord, DlqEnvelope
from graph_ingest.domain.error_detail import ErrorContext, ErrorDetail, RetryAdvice
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import LEGAL_TRANSITIONS, Stage
from graph_ingest.schemas.messages import dlq_message
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.failures import FailureAttempt


def failure_detail(
    info: ErrorInfo,
    trace_id: str,
    message: PlanMessage | None,
    stage: Stage | None,
    advice: RetryAdvice,
    *,
    worker_id: str,
) -> ErrorDetail:
    """The recorded detail of a failed attempt: the error, where it was consumed (None for a
    follower, which was not), the operation's stage and what the retry policy advises."""
    return ErrorDetail.create(
        trace_id=trace_id,
        code=info.code,
        error_class=info.error_class,
        message=info.message,
        context=ErrorContext(
            topic=message.topic if message else None,
            partition=message.partition if message else None,
            offset=message.offset if message else None,
            stage=stage,
            worker_id=worker_id,
            code_version=__version__,
        ),
        retry=advice,
    )


def attempt_records(history: Sequence[FailureAttempt]) -> list[AttemptRecord]:
    """The recorded attempts as a DLQ envelope lists them."""
    return [attempt_record(failed) for failed in history]


def attempt_record(failed: FailureAttempt) -> AttemptRecord:
    return AttemptRecord.of(failed.detail, attempt=failed.attempt, tier=failed.tier, at=failed.at)


def record_failure(
    operation: Operation,
    stage: Stage,
    failed: FailureAttempt,
    attempts: int,
    dlq_id: str | None = None,
) -> Operation:
    """The operation moved to ``stage`` with the recorded attempt's error (its error id and trace
    id too) as its last error, or (where that stage is not reachable, e.g. FAILED from
    GRAPH_APPLIED) with the error recorded in its stage. ``attempts``: how many failed attempts
    of the operation are recorded, this one included — the count its DLQ entry shows, so that
    the two agree (moving to DEAD_LETTERED is itself a failed attempt, which the stage change
    alone would not count)."""
    info = failed.detail.error_info()
    if stage in LEGAL_TRANSITIONS[operation.stage]:
        moved = operation.transition(stage, failed.at, info)
    else:
        moved = operation.with_error(info, failed.at)
    update: dict[str, object] = {"attempts": attempts}
    if dlq_id is not None:
        update["dlq_id"] = dlq_id
    return moved.model_copy(update=update)


def dead_letter(uow: UnitOfWork, dlq_topic: str, dlq_id: str, envelope: DlqEnvelope) -> None:
    """Write the entry of ``envelope`` to the DLQ index and its message to the outbox."""
    entry = entry_of(dlq_id, envelope)
    uow.put_dlq_entries([entry])
    uow.enqueue([dlq_message(dlq_topic, entry)])
