"""The operation fold as a pure decision: every verdict, and order-free over duplicated and
shuffled events (seeded)."""

from __future__ import annotations

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.projections.fold import FoldVerdict, OperationStatus, fold, fold_all
from tests.operation_histories import (
    DEAD_LETTERED_AFTER_RETRY,
    PATHS,
    histories,
    history,
    scrambled,
)

pytestmark = pytest.mark.timeout(60)


def folded(events: list) -> dict[str, OperationStatus]:
    statuses: dict[str, OperationStatus] = {}
    for event in events:
        statuses[event.operation_id] = fold(statuses.get(event.operation_id), event).status
    return statuses


def test_the_first_event_makes_the_status() -> None:
    prepared = history("op-1", ())[0]
    result = fold(None, prepared)
    assert result.verdict is FoldVerdict.ADVANCE
    assert result.status == OperationStatus.of(prepared, result.status.transitions)
    assert [t.sequence for t in result.status.transitions] == [1]


def test_a_newer_event_advances_and_keeps_the_history() -> None:
    prepared, applied, *_ = history("op-1", (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED))
    result = fold(fold(None, prepared).status, applied)
    assert result.verdict is FoldVerdict.ADVANCE
    assert result.status.stage is Stage.GRAPH_APPLIED
    assert [t.stage for t in result.status.transitions] == [Stage.PREPARED, Stage.GRAPH_APPLIED]


def test_an_older_event_never_overwrites_but_fills_the_history() -> None:
    prepared, applied = history("op-1", (Stage.GRAPH_APPLIED,))
    newest = fold(None, applied).status
    result = fold(newest, prepared)
    assert result.verdict is FoldVerdict.BACKFILL
    assert (result.status.stage, result.status.sequence) == (Stage.GRAPH_APPLIED, 2)
    assert [t.sequence for t in result.status.transitions] == [1, 2]


@pytest.mark.parametrize("which", [0, 1], ids=["older", "equal"])
def test_an_event_seen_already_changes_nothing(which: int) -> None:
    events = history("op-1", (Stage.GRAPH_APPLIED,))
    status, _ = fold_all(None, events)
    assert status is not None
    result = fold(status, events[which])
    assert result.verdict is FoldVerdict.DUPLICATE
    assert result.status is status


def test_every_transition_keeps_its_own_time() -> None:
    # FAILED -> PREPARED -> DEAD_LETTERED: the snapshot's stage_times keep one PREPARED only
    events = history("op-1", DEAD_LETTERED_AFTER_RETRY)
    status, verdicts = fold_all(None, reversed(events))
    assert status is not None
    assert verdicts == [FoldVerdict.ADVANCE, *[FoldVerdict.BACKFILL] * 3]
    steps = [(t.stage, t.at) for t in status.transitions]
    assert [stage for stage, _ in steps] == [
        Stage.PREPARED,
        Stage.FAILED,
        Stage.PREPARED,
        Stage.DEAD_LETTERED,
    ]
    assert [at for _, at in steps] == sorted(at for _, at in steps)
    assert (status.stage, status.attempts) == (Stage.DEAD_LETTERED, 1)
    assert status.last_error is not None and status.last_error.error_class == "Neo4jDown"


@pytest.mark.parametrize("seed", range(25))
def test_duplicated_and_shuffled_events_fold_to_the_in_order_result(seed: int) -> None:
    events = histories(len(PATHS) * 3)
    in_order = folded(events)
    assert folded(scrambled(events, seed)) == in_order
    for operation_id, status in in_order.items():
        newest = max(
            (e for e in events if e.operation_id == operation_id), key=lambda e: e.sequence
        )
        assert (status.stage, status.sequence, status.attempts) == (
            newest.stage,
            newest.sequence,
            newest.attempts,
        )
