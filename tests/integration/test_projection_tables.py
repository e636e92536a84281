"""The read tables on real PostgreSQL: duplicated and shuffled operation events give identical
tables; positions are recorded with the folds; the read service answers and pages."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.queries import InvalidQuery, OperationFilter, OperationQueries
from graph_ingest.projections.tables import OPERATION_STATUS, SKIPPED, ReadTables
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import (
    TOPIC,
    at_offsets,
    fold_in_batches,
    opened_read_tables,
    positions,
    status_rows,
)
from tests.operation_histories import START, histories, scrambled

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_duplicated_and_shuffled_events_give_identical_tables(
    pipeline: Pipeline, pipeline_factory: PipelineFactory, read_tables: ReadTables
) -> None:
    # Given the operation events of 30 operations, and a second store schema of its own
    events = histories(30)
    first = read_tables
    other = pipeline_factory()
    with opened_read_tables(other.settings) as second:
        # When one table folds them in order, the other duplicated and shuffled, in batches
        fold_in_batches(first, at_offsets(events), size=7)
        for seed in range(3):
            fold_in_batches(second, at_offsets(scrambled(events, seed)), size=11 + seed)
        # Then both tables hold the same rows, each the newest snapshot with every step
        in_order = status_rows(pipeline.settings)
        assert len(in_order) == 30
        assert status_rows(other.settings) == in_order
    newest = {e.operation_id: e for e in sorted(events, key=lambda e: e.sequence)}
    for row in in_order:
        expected = newest[row["operation_id"]]
        assert (row["stage"], row["sequence"]) == (expected.stage.value, expected.sequence)
        assert [t["sequence"] for t in row["transitions"]] == list(range(1, expected.sequence + 1))


def test_a_batch_records_its_positions_and_skipped_events(
    pipeline: Pipeline, read_tables: ReadTables
) -> None:
    events = at_offsets(histories(2))
    skipped = replace(events[-1], offset=len(events), operation=None)
    outcomes = read_tables.fold([*events, skipped])
    assert outcomes[(TOPIC, 0, skipped.offset)] == SKIPPED
    assert set(outcomes.values()) == {"ADVANCE", SKIPPED}
    assert positions(pipeline.settings) == {(TOPIC, 0): skipped.offset}
    assert read_tables.positions(OPERATION_STATUS, [(TOPIC, 0), (TOPIC, 1)]) == {
        (TOPIC, 0): skipped.offset
    }
    # An older position never moves the stored one back
    read_tables.fold(events[:1])
    assert positions(pipeline.settings) == {(TOPIC, 0): skipped.offset}


def test_the_read_service_answers_and_pages_with_a_stable_cursor(
    pipeline: Pipeline, read_tables: ReadTables
) -> None:
    events = histories(23)
    read_tables.fold(at_offsets(events))
    queries = OperationQueries(read_tables, committed=pipeline.store)
    # One operation, with its history
    status = queries.operation_status("op-001")
    assert status is not None
    assert status.stage is Stage.DEAD_LETTERED
    assert [t.stage for t in status.transitions] == [
        Stage.PREPARED,
        Stage.FAILED,
        Stage.PREPARED,
        Stage.DEAD_LETTERED,
    ]
    assert queries.operation_status("op-none") is None
    # Every operation once, newest first, over pages of 5
    seen: list[str] = []
    cursor = None
    while True:
        page = queries.list_operations(limit=5, cursor=cursor)
        seen.extend(s.operation_id for s in page.operations)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted({e.operation_id for e in events})
    assert len(seen) == len(set(seen))
    # Filters
    dead = queries.list_operations(OperationFilter(stage=Stage.DEAD_LETTERED), limit=100)
    assert {s.operation_id for s in dead.operations} == {
        "op-001",
        "op-006",
        "op-011",
        "op-016",
        "op-021",
    }
    failed = queries.list_operations(
        OperationFilter(error_code=StatusCode.UNAVAILABLE, document="doc-1"), limit=100
    )
    assert {s.operation_id for s in failed.operations} == {"op-001", "op-021"}
    stuck = queries.list_operations(
        OperationFilter(older_than=START + timedelta(seconds=1)), limit=100
    )
    assert {s.stage for s in stuck.operations} == {Stage.PREPARED}
    with pytest.raises(InvalidQuery):
        queries.list_operations(cursor="not-a-cursor")
    with pytest.raises(InvalidQuery):
        queries.list_operations(limit=0)
