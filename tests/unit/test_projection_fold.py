"""The operation fold as a pure decision: every verdict, and order-free over duplicated and
shuffled events (seeded)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from graph_ingest.domain.operation import Operation, OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.fold import (
    FoldVerdict,
    OperationStatus,
    fold,
    fold_all,
    recorded_errors,
)
from graph_ingest.projections.rows import JSONB_COLUMNS, status_columns, status_from_row
from tests.operation_histories import (
    DEAD_LETTERED_AFTER_RETRY,
    PATHS,
    START,
    UNAVAILABLE,
    histories,
    history,
    scrambled,
)

pytestmark = pytest.mark.timeout(60)


def folded(events: list[Operation]) -> dict[str, OperationStatus]:
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


def test_each_failure_keeps_its_own_step_whatever_the_order() -> None:
    # Given FAILED (e1) -> PREPARED -> DEAD_LETTERED (e2): each snapshot carries its last error
    events = history("op-1", DEAD_LETTERED_AFTER_RETRY)
    first_failure, dead_lettered = events[1].last_error, events[3].last_error
    assert first_failure is not None and dead_lettered is not None
    assert first_failure.error_id != dead_lettered.error_id
    # When they are folded in any order
    for seed in range(10):
        status, _ = fold_all(None, scrambled(events, seed))
        assert status is not None
        # Then each error shows once, on the step that recorded it
        assert recorded_errors(status.transitions) == [None, first_failure, None, dead_lettered]
        assert status.last_error == dead_lettered


def test_the_v2_fields_come_from_the_newest_snapshot() -> None:
    prepared, *_, parked = history("op-1", (Stage.PARKED,))
    parked = parked.model_copy(update={"parked_behind": "op-leader"})
    status, _ = fold_all(None, [parked, prepared])
    assert status is not None
    assert (status.plan_kind, status.submission_id, status.parked_behind) == (
        PlanKind.INGESTION,
        "sub-op-1",
        "op-leader",
    )


def test_v1_events_fold_with_the_v2_fields_empty_and_equal_errors_read_as_one() -> None:
    events = history("op-1", DEAD_LETTERED_AFTER_RETRY, v2=False)
    status, _ = fold_all(None, reversed(events))
    assert status is not None
    assert (status.plan_kind, status.submission_id, status.waits) == (None, None, ())
    assert recorded_errors(status.transitions) == [None, UNAVAILABLE, None, None]


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_a_status_survives_its_read_table_row(v2: bool) -> None:
    # Given a status with every field set, as the projector writes it
    wait = OutageWait(dependency="neo4j", started_at=START, ended_at=START + timedelta(minutes=6))
    events = history("op-1", (*DEAD_LETTERED_AFTER_RETRY, Stage.PREPARED, Stage.FAILED), v2=v2)
    status, _ = fold_all(None, events)
    assert status is not None
    status = replace(status, retry_tier=1, waits=(wait,) if v2 else ())
    # When it is written as parameters and read back as a row (JSONB as psycopg returns it)
    arrays = status_columns([status])
    row = {name: values[0] for name, values in arrays.items()}
    row.update({name: json.loads(row[name]) for name in JSONB_COLUMNS})
    # Then it is the same status, each step with its error
    assert status_from_row(row) == status
    # (v1 errors carry no id: a later failure equal to the one before reads as the same one)
    recorded = [step["error"] is not None for step in row["transitions"]]
    assert recorded == [False, True, False, v2, False, v2]
