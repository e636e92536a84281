"""The fold of one operation snapshot into an operation's status, as a pure decision (the model
is ``domain.admission.decide``): what the event changes, given what the read table holds.

The operations topic carries full snapshots numbered by ``sequence``; it is compacted, delivered
at least once, and a rebalance or a rebuild may replay it. So the fold must be order-free:

=============================  ===========  =====================================================
the event's sequence           verdict      the status afterwards
=============================  ===========  =====================================================
no status yet                  ADVANCE      the snapshot, with its one step of history
newer than the status          ADVANCE      the snapshot, its step added to the history
older, its step not yet seen   BACKFILL     unchanged but for its step added to the history
seen already (equal or older)  DUPLICATE    unchanged
=============================  ===========  =====================================================

The history keeps every step seen, each with its own time, in sequence order: the snapshot's
``stage_times`` keep one time per stage, so FAILED -> PREPARED -> DEAD_LETTERED would lose the
first PREPARED. Folding any permutation of a set of events, duplicates included, gives one
result: the newest snapshot and the union of their steps.

Each step also keeps the snapshot's last error (``Transition.last_error``: the write side carries
an operation's last error on until a newer one replaces it), so that every failure keeps its own
step: the error a step *recorded* is its last error when that differs from the step before it
(``recorded_errors``) — FAILED (e1) -> PREPARED -> FAILED (e2) shows e1 and e2 once each, on the
FAILED steps. Events of operation.v2 carry an error id per failure; of v1 events, two equal
errors in a row read as one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from graph_ingest.domain.operation import ErrorInfo, Operation, OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage


class FoldVerdict(StrEnum):
    ADVANCE = "ADVANCE"  # the newest snapshot yet: the status becomes it
    BACKFILL = "BACKFILL"  # an older snapshot not seen before: only its step is added
    DUPLICATE = "DUPLICATE"  # seen already: nothing changes


@dataclass(frozen=True, slots=True)
class Transition:
    """One snapshot as a step of the operation's history: a stage entered, or a failed attempt
    recorded in place (the stage unchanged, ``attempts`` one more)."""

    sequence: int
    stage: Stage
    at: datetime
    attempts: int
    last_error: ErrorInfo | None = None
    """The snapshot's last error (recorded at this step or carried on from an earlier one)."""

    @classmethod
    def of(cls, operation: Operation) -> Transition:
        return cls(
            operation.sequence,
            operation.stage,
            operation.updated_at,
            operation.attempts,
            operation.last_error,
        )


def recorded_errors(history: Iterable[Transition]) -> list[ErrorInfo | None]:
    """The error each step of ``history`` (in sequence order) recorded: its last error where
    that differs from the step before it, else None."""
    recorded: list[ErrorInfo | None] = []
    before: ErrorInfo | None = None
    for step in history:
        recorded.append(step.last_error if step.last_error != before else None)
        before = step.last_error
    return recorded


def carried_errors(recorded: Iterable[ErrorInfo | None]) -> list[ErrorInfo | None]:
    """The inverse of ``recorded_errors``: each step's last error, carried on from the step that
    recorded it (an operation's last error is never cleared)."""
    carried: list[ErrorInfo | None] = []
    last: ErrorInfo | None = None
    for error in recorded:
        last = error if error is not None else last
        carried.append(last)
    return carried


@dataclass(frozen=True, slots=True)
class OperationStatus:
    """What the read table holds of one operation: its newest snapshot, field by field, and its
    history. The read service returns it as it is (an API serializes the dataclass)."""

    operation_id: str
    space: str
    document_id: str
    expected_revision: int
    fingerprint: str
    stage: Stage
    sequence: int
    attempts: int
    last_error: ErrorInfo | None
    next_retry_at: datetime | None
    dlq_id: str | None
    created_at: datetime
    updated_at: datetime
    transitions: tuple[Transition, ...]
    plan_kind: PlanKind | None = None
    submission_id: str | None = None
    retry_tier: int | None = None
    parked_behind: str | None = None
    waits: tuple[OutageWait, ...] = ()

    @classmethod
    def of(cls, operation: Operation, transitions: tuple[Transition, ...]) -> OperationStatus:
        return cls(
            operation_id=operation.operation_id,
            space=operation.space,
            document_id=operation.document_id,
            expected_revision=operation.expected_revision,
            fingerprint=operation.fingerprint,
            stage=operation.stage,
            sequence=operation.sequence,
            attempts=operation.attempts,
            last_error=operation.last_error,
            next_retry_at=operation.next_retry_at,
            dlq_id=operation.dlq_id,
            created_at=operation.created_at,
            updated_at=operation.updated_at,
            transitions=transitions,
            plan_kind=operation.plan_kind,
            submission_id=operation.submission_id,
            retry_tier=operation.retry_tier,
            parked_behind=operation.parked_behind,
            waits=operation.waits,
        )


@dataclass(frozen=True, slots=True)
class Fold:
    verdict: FoldVerdict
    status: OperationStatus
    """The status after the event (the stored one, unchanged, for DUPLICATE)."""


def fold(stored: OperationStatus | None, event: Operation) -> Fold:
    step = Transition.of(event)
    if stored is None:
        return Fold(FoldVerdict.ADVANCE, OperationStatus.of(event, (step,)))
    if any(seen.sequence == step.sequence for seen in stored.transitions):
        return Fold(FoldVerdict.DUPLICATE, stored)
    history = tuple(sorted((*stored.transitions, step), key=lambda t: t.sequence))
    if event.sequence > stored.sequence:
        return Fold(FoldVerdict.ADVANCE, OperationStatus.of(event, history))
    return Fold(FoldVerdict.BACKFILL, replace(stored, transitions=history))


def fold_all(
    stored: OperationStatus | None, events: Iterable[Operation]
) -> tuple[OperationStatus | None, list[FoldVerdict]]:
    """Fold ``events`` (of one operation) in order: the status after them, and each verdict."""
    status = stored
    verdicts: list[FoldVerdict] = []
    for event in events:
        folded = fold(status, event)
        status = folded.status
        verdicts.append(folded.verdict)
    return status, verdicts


__all__ = [
    "Fold",
    "FoldVerdict",
    "OperationStatus",
    "Transition",
    "carried_errors",
    "fold",
    "fold_all",
    "recorded_errors",
]
