"""The DLQ entries, worker degradation and documents read tables on real PostgreSQL: duplicated
and shuffled events give identical tables, an older message never overwrites a newer one, each
fold records its positions; the read services filter and page."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.dlq_entries import DlqEntryQueries, DlqFilter
from graph_ingest.projections.documents import DocumentQueries
from graph_ingest.projections.read_events import ReadEvent
from graph_ingest.projections.read_folds import ReadFolds
from graph_ingest.projections.tables import ReadTables, read_schema
from graph_ingest.settings import Settings
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import at_offsets, opened_read_tables
from tests.operation_histories import histories
from tests.read_view_samples import AT, REQUESTS_TOPIC, degradation_changes, dlq_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def folds_of(tables: ReadTables, settings: Settings) -> ReadFolds:
    return ReadFolds(tables, settings.topics.model_copy(update={"requests": REQUESTS_TOPIC}))


def events() -> list[ReadEvent]:
    """DLQ entries, two workers' degradation and 12 operations over 4 documents."""
    return [*dlq_events(), *degradation_changes("w-1", "w-2"), *at_offsets(histories(12))]


def scrambled(events: Sequence[ReadEvent], seed: int) -> list[ReadEvent]:
    rng = random.Random(seed)
    copies = [*events, *rng.sample(list(events), k=len(events) // 3)]
    rng.shuffle(copies)
    return copies


def rows(settings: Settings, table: str, key: str, columns: str = "*") -> list[dict[str, Any]]:
    schema = read_schema(settings.postgres)
    with psycopg.connect(settings.postgres.conninfo(), row_factory=dict_row) as conn:
        return conn.execute(f'SELECT {columns} FROM "{schema}".{table} ORDER BY {key}').fetchall()


def tables_of(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    return {
        "dlq_entries": rows(settings, "dlq_entries", "dlq_id"),
        "worker_degradation": rows(settings, "worker_degradation", "worker_id"),
        "documents": rows(settings, "documents", "space, document_id"),
        "tracking_positions": rows(  # when each position moved aside
            settings, "tracking_positions", "1, 2, 3", 'projection, topic, partition, "offset"'
        ),
    }


def test_duplicated_and_shuffled_events_give_identical_tables(
    pipeline: Pipeline, pipeline_factory: PipelineFactory, read_tables: ReadTables
) -> None:
    # Given the events of every read table, and a second store schema of its own
    in_order = events()
    other = pipeline_factory()
    with opened_read_tables(other.settings) as second:
        # When one schema folds them in order, the other duplicated and shuffled, in batches
        first_folds, second_folds = (
            folds_of(read_tables, pipeline.settings),
            folds_of(second, other.settings),
        )
        for start in range(0, len(in_order), 9):
            first_folds.fold(in_order[start : start + 9])
        for seed in range(3):
            shuffled = scrambled(in_order, seed)
            for start in range(0, len(shuffled), 7 + seed):
                second_folds.fold(shuffled[start : start + 7 + seed])
        # Then both hold the same rows
        expected = tables_of(pipeline.settings)
        assert tables_of(other.settings) == expected
    # each entry its newest envelope: op-1's purged, op-2's failed again, the request's
    entries = {e["operation_id"] or "request": e for e in expected["dlq_entries"]}
    assert {k: (e["status"], e["attempts"], e["is_request"]) for k, e in entries.items()} == {
        "op-1": ("RESOLVED", 4, False),
        "op-2": ("PENDING_REVIEW", 4, False),
        "request": ("PENDING_REVIEW", 1, True),
    }
    # each worker its newest level, with the breakers not closed
    assert {
        w["worker_id"]: (w["level"], w["breakers"]) for w in expected["worker_degradation"]
    } == {
        "w-1": ("L1", {"neo4j": "half-open"}),
        "w-2": ("L1", {"neo4j": "half-open"}),
    }
    assert len(expected["documents"]) == 4
    # and every projection its position in every topic it folds
    assert {(p["projection"], p["topic"]) for p in expected["tracking_positions"]} == {
        ("dlq_entries", "plans.dlq"),
        ("worker_degradation", "degradation"),
        ("operation_status", "ops"),
        ("documents", "ops"),
    }


def test_an_older_envelope_never_overwrites_a_newer_one(
    pipeline: Pipeline, read_tables: ReadTables
) -> None:
    folds = folds_of(read_tables, pipeline.settings)
    dead_letters = dlq_events()
    folds.fold(dead_letters[-3:])  # the newest of each entry
    before = rows(pipeline.settings, "dlq_entries", "dlq_id")
    outcomes = folds.fold(dead_letters[:-3])
    assert set(outcomes.values()) == {"SUPERSEDED"}
    assert rows(pipeline.settings, "dlq_entries", "dlq_id") == before


def test_the_read_services_filter_and_page(pipeline: Pipeline, read_tables: ReadTables) -> None:
    folds = folds_of(read_tables, pipeline.settings)
    folds.fold(events())
    queries = DlqEntryQueries(read_tables)
    # Every entry once, oldest first, over pages of 1
    seen: list[str] = []
    cursor = None
    while True:
        page = queries.list_entries(limit=1, cursor=cursor)
        seen.extend(e.dlq_id for e in page.entries)
        if (cursor := page.next_cursor) is None:
            break
    assert len(seen) == len(set(seen)) == 3
    pending = queries.list_entries(DlqFilter(status=DlqStatus.PENDING_REVIEW)).entries
    assert {e.operation_id for e in pending} == {"op-2", None}
    invalid = queries.list_entries(DlqFilter(code=StatusCode.INVALID_ARGUMENT)).entries
    assert [e.is_request for e in invalid] == [True]
    assert queries.list_entries(DlqFilter(error_class="Nope")).entries == ()
    assert queries.list_entries(DlqFilter(until=AT)).entries == ()
    one = queries.entry(seen[0])
    assert one is not None and one.dlq_id == seen[0]
    assert queries.entry("dlq-none") is None
    # One document, with its operations
    view = DocumentQueries(read_tables).document_view("it", "doc-1")
    assert view is not None and len(view.operations) == 3
    assert DocumentQueries(read_tables).document_view("it", "doc-none") is None
