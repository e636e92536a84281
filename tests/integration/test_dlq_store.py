"""The DLQ index reads and the reindex writes of PostgresOperationStore, on a real PostgreSQL."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import wait_until
from tests.integration.test_postgres_store import lock_waiters, pg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
__all__ = ["pg", "store"]  # the fixtures of test_postgres_store: a schema of each test's own

DLQ_TOPIC = "test.plans.dlq"


def execute(pg: PostgresSettings, statement: str, *params: Any) -> None:
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        conn.execute(statement, params)


def entry(number: int, *, minutes_ago: float, **changes: Any) -> DlqEntry:
    fields: dict[str, Any] = {
        "dlq_id": f"dlq-{number:02d}",
        "status": DlqStatus.PENDING_REVIEW,
        "operation_id": f"op-{number}",
        "fingerprint": None,
        "space": "kb",
        "document_id": f"doc-{number}",
        "code": StatusCode.FAILED_PRECONDITION,
        "error_class": "EdgeEndpointMissing",
        "message": "endpoint does not exist",
        "parked_behind": None,
        "original_topic": "plans",
        "original_partition": 0,
        "original_offset": number,
        "attempts": 1,
        "dead_lettered_at": datetime.now(UTC) - timedelta(minutes=minutes_ago),
        "envelope": f"envelope {number}".encode(),
    }
    return DlqEntry(**{**fields, **changes})


@pytest.fixture
def entries(store: PostgresOperationStore) -> list[DlqEntry]:
    """Five entries, oldest first: two pending codes, a replayed and a resolved one."""
    made = [
        entry(1, minutes_ago=50),
        entry(2, minutes_ago=40, code=StatusCode.INVALID_ARGUMENT, space=None, document_id=None),
        entry(3, minutes_ago=30, status=DlqStatus.REPLAYED),
        entry(4, minutes_ago=20, status=DlqStatus.RESOLVED, space="other"),
        entry(5, minutes_ago=1),
    ]
    with store.unit_of_work() as uow:
        uow.put_dlq_entries(list(reversed(made)))
    return made


def ids(found: list[DlqEntry]) -> list[str]:
    return [e.dlq_id for e in found]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (DlqQuery(), [1, 2, 3, 4, 5]),
        (DlqQuery(status=DlqStatus.PENDING_REVIEW), [1, 2, 5]),
        (DlqQuery(code=StatusCode.INVALID_ARGUMENT), [2]),
        (DlqQuery(space="kb"), [1, 3, 5]),
        (DlqQuery(space="kb", document_id="doc-3"), [3]),
        (DlqQuery(older_than_s=25 * 60), [1, 2, 3]),
        (DlqQuery(status=DlqStatus.PENDING_REVIEW, older_than_s=10 * 60, limit=1), [1]),
        (DlqQuery(limit=2), [1, 2]),
    ],
)
def test_entries_are_listed_oldest_first_by_every_filter(
    store: PostgresOperationStore, entries: list[DlqEntry], query: DlqQuery, expected: list[int]
) -> None:
    found = store.list_dlq_entries(query)
    assert ids(found) == [f"dlq-{n:02d}" for n in expected]
    assert store.count_dlq_entries(replace(query, limit=None)) == len(
        store.list_dlq_entries(replace(query, limit=None))
    )
    assert found == [e for e in entries if e.dlq_id in ids(found)]


def test_a_keyset_cursor_pages_through_the_entries(
    store: PostgresOperationStore, entries: list[DlqEntry]
) -> None:
    pages: list[list[str]] = []
    after = None
    while page := store.list_dlq_entries(DlqQuery(limit=2, after=after)):
        pages.append(ids(page))
        after = (page[-1].dead_lettered_at, page[-1].dlq_id)
    assert pages == [["dlq-01", "dlq-02"], ["dlq-03", "dlq-04"], ["dlq-05"]]


def test_one_entry_is_read_by_id(store: PostgresOperationStore, entries: list[DlqEntry]) -> None:
    assert store.get_dlq_entry("dlq-03") == entries[2]
    assert store.get_dlq_entry("dlq-missing") is None


def test_stats_count_by_code_and_status_and_age_the_oldest_pending(
    store: PostgresOperationStore, entries: list[DlqEntry]
) -> None:
    stats = store.dlq_stats()
    assert stats.total == 5
    assert stats.by_status() == {
        DlqStatus.PENDING_REVIEW: 3,
        DlqStatus.REPLAYED: 1,
        DlqStatus.RESOLVED: 1,
    }
    assert stats.by_code() == {StatusCode.FAILED_PRECONDITION: 4, StatusCode.INVALID_ARGUMENT: 1}
    assert stats.oldest_pending_age_s is not None
    assert 50 * 60 - 5 <= stats.oldest_pending_age_s <= 50 * 60 + 60


def test_stats_of_an_empty_index(store: PostgresOperationStore) -> None:
    stats = store.dlq_stats()
    assert (stats.total, stats.oldest_pending_age_s) == (0, None)
    assert set(stats.by_status().values()) == {0}


def dlq_row(key: str, value: bytes) -> OutboxMessage:
    return OutboxMessage(topic=DLQ_TOPIC, key=key.encode(), value=value, headers={})


def test_the_outbox_gives_the_newest_value_per_key_not_published_before_a_time(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.enqueue([dlq_row("dlq-a", b"a1"), dlq_row("dlq-b", b"b1")])
    execute(pg, "UPDATE outbox SET published_at = now() - interval '1 hour'")
    since = store.database_time()
    with store.unit_of_work() as uow:
        uow.enqueue([dlq_row("dlq-b", b"b2"), dlq_row("dlq-c", b"c1"), dlq_row("dlq-b", b"b3")])
        uow.enqueue([OutboxMessage(topic="other", key=b"dlq-c", value=b"x", headers={})])
    execute(pg, "UPDATE outbox SET published_at = now() WHERE message_value = 'b2'")
    with store.unit_of_work() as uow:
        newest = uow.newest_outbox_values(DLQ_TOPIC, since)
    assert newest == {b"dlq-b": b"b3", b"dlq-c": b"c1"}


def test_replacing_the_index_leaves_only_the_given_rows(
    store: PostgresOperationStore, entries: list[DlqEntry]
) -> None:
    kept = replace(entries[0], status=DlqStatus.RESOLVED)
    with store.unit_of_work() as uow:
        uow.lock_dlq_index()
        uow.replace_dlq_entries([kept, entry(9, minutes_ago=0)])
    assert ids(store.list_dlq_entries(DlqQuery())) == ["dlq-01", "dlq-09"]
    assert store.get_dlq_entry("dlq-01") == kept


def test_the_index_lock_holds_writers_until_the_replacement_commits(
    store: PostgresOperationStore, pg: PostgresSettings, entries: list[DlqEntry]
) -> None:
    written = threading.Event()

    def route_one_more() -> None:
        with store.unit_of_work() as uow:
            uow.put_dlq_entries([entry(7, minutes_ago=0)])
        written.set()

    with store.unit_of_work() as uow:
        uow.lock_dlq_index()
        writer = threading.Thread(target=route_one_more)
        writer.start()
        wait_until(lambda: lock_waiters(pg) == 1, timeout_s=10, what="the writer to wait")
        assert not written.is_set()
        uow.replace_dlq_entries([])
    writer.join(timeout=10)
    assert written.is_set()
    assert ids(store.list_dlq_entries(DlqQuery())) == ["dlq-07"]
