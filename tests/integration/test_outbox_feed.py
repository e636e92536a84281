"""The relay's outbox feed (``PostgresOutboxFeed``) on a real PostgreSQL: its lock, rows, marks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.migrate import migrate
from graph_ingest.store.outbox import OutboxRow
from graph_ingest.store.postgres.outbox import PostgresOutboxFeed
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import Bell, wait_until
from tests.integration.test_postgres_store import TOPIC, encode, pg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
__all__ = ["pg", "store"]  # the fixtures of test_postgres_store: a schema of each test's own

LOCK_KEY = 4242


@pytest.fixture
def feeds(pg: PostgresSettings) -> Iterator[tuple[PostgresOutboxFeed, PostgresOutboxFeed]]:
    first, second = PostgresOutboxFeed(pg), PostgresOutboxFeed(pg)
    yield first, second
    first.close()
    second.close()


def enqueue(store: PostgresOperationStore, count: int, stage: Stage = Stage.PREPARED) -> None:
    with store.unit_of_work() as uow:
        uow.enqueue(
            [
                OutboxMessage(
                    topic="t.ops",
                    key=f"op-{n}".encode(),
                    value=f"value {n}".encode(),
                    headers={"stage": stage.value},
                    operation_id=f"op-{n}",
                    sequence=n,
                )
                for n in range(count)
            ]
        )


def test_one_session_holds_the_relay_lock_until_it_closes(
    feeds: tuple[PostgresOutboxFeed, PostgresOutboxFeed],
) -> None:
    first, second = feeds
    first.open()
    second.open()

    assert first.try_lock(LOCK_KEY)
    assert not second.try_lock(LOCK_KEY)

    first.close()
    assert not first.is_open
    # the server ends the closed session (and frees its lock) a moment after the client
    wait_until(lambda: second.try_lock(LOCK_KEY), timeout_s=10, what="the lock freed")


def test_rows_come_oldest_first_and_are_marked_once(
    store: PostgresOperationStore, feeds: tuple[PostgresOutboxFeed, PostgresOutboxFeed]
) -> None:
    feed, _ = feeds
    enqueue(store, 5)
    assert feed.unpublished_count() == 5  # before open: a short session of its own
    feed.open()

    rows = feed.unpublished(3)

    assert [row.operation_id for row in rows] == ["op-0", "op-1", "op-2"]
    assert rows[0].created_at is not None  # (the relay's publish latency starts there)
    assert rows[0] == OutboxRow(
        rows[0].id,
        "t.ops",
        b"op-0",
        b"value 0",
        {"stage": "PREPARED"},
        "op-0",
        0,
        created_at=rows[0].created_at,
    )
    assert [row.id for row in rows] == sorted(row.id for row in rows)
    ids = [row.id for row in rows]
    assert feed.mark_published(ids) == 3
    assert feed.mark_published(ids) == 0
    assert feed.unpublished_count() == 2
    assert [row.operation_id for row in feed.unpublished(10)] == ["op-3", "op-4"]


def test_a_call_on_a_closed_feed_raises_our_error(
    feeds: tuple[PostgresOutboxFeed, PostgresOutboxFeed],
) -> None:
    feed, _ = feeds
    with pytest.raises(GraphIngestError, match="not open"):
        feed.unpublished(1)


@pytest.fixture
def listening(pg: PostgresSettings) -> Iterator[PostgresOutboxFeed]:
    """An open feed: it listens for committed rows from its first moment."""
    feed = PostgresOutboxFeed(pg)
    feed.open()
    yield feed
    feed.close()


def test_a_commit_of_outbox_rows_wakes_a_waiting_feed_of_its_schema(
    listening: PostgresOutboxFeed, store: PostgresOperationStore
) -> None:
    # Given nothing new, a wait runs out its time and says so
    assert listening.wait_for_rows(0.2) is False
    # When rows are committed by another session, the last of them ending an operation's journey
    enqueue(store, 3, Stage.COMPLETED)
    # Then the waiting feed is told, well before a long timeout would end
    started = time.monotonic()
    assert listening.wait_for_rows(30.0) is True
    assert time.monotonic() - started < 10.0
    assert [row.sequence for row in listening.unpublished(10)] == [0, 1, 2]


# A later commit of the same journey always follows these stages' rows, and wakes the relay.
IN_FLIGHT = {Stage.PREPARED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED}


@pytest.mark.parametrize("stage", list(Stage))
def test_only_rows_that_end_a_journey_wake_the_feed(
    stage: Stage, listening: PostgresOutboxFeed, store: PostgresOperationStore
) -> None:
    enqueue(store, 2, stage)
    assert listening.wait_for_rows(0.5 if stage in IN_FLIGHT else 30.0) is (stage not in IN_FLIGHT)


def test_rows_without_a_stage_wake_the_feed_and_so_does_a_mixed_commit(
    listening: PostgresOutboxFeed, store: PostgresOperationStore
) -> None:
    # a retry-tier copy, a DLQ envelope or a re-published plan carries no stage header
    with store.unit_of_work() as uow:
        uow.enqueue([OutboxMessage(topic="t.retry", key=b"k", value=b"v", headers={})])
    assert listening.wait_for_rows(30.0) is True
    # in-flight rows committed with a row that ends a journey leave with it
    with store.unit_of_work() as uow:
        for stage in (Stage.PREPARED, Stage.GRAPH_APPLIED, Stage.FAILED):
            uow.enqueue(
                [OutboxMessage(topic="t.ops", key=b"k", value=b"v", headers={"stage": stage.value})]
            )
    assert listening.wait_for_rows(30.0) is True
    assert len(listening.unpublished(10)) == 4


def test_a_rung_bell_ends_the_wait_without_rows(listening: PostgresOutboxFeed) -> None:
    bell = Bell()
    try:
        threading.Timer(0.1, bell.ring).start()
        started = time.monotonic()
        assert listening.wait_for_rows(60.0, wake=bell.fileno) is False
        assert time.monotonic() - started < 30.0
    finally:
        bell.close()


def test_a_notification_received_during_a_query_is_not_missed(
    listening: PostgresOutboxFeed, store: PostgresOperationStore
) -> None:
    enqueue(store, 1, Stage.COMPLETED)
    listening.unpublished(10)  # the notification arrives while the feed's session is busy
    assert listening.wait_for_rows(30.0) is True


def test_rows_of_another_schema_do_not_wake_the_feed(
    pg: PostgresSettings, listening: PostgresOutboxFeed
) -> None:
    other = pg.model_copy(update={"schema_name": f"{pg.schema_name}_other"})
    migrate(other)
    elsewhere = PostgresOperationStore(other, event_encoder=encode, operations_topic=TOPIC)
    elsewhere.start()
    try:
        enqueue(elsewhere, 2, Stage.COMPLETED)
        assert listening.wait_for_rows(1.0) is False
    finally:
        elsewhere.close()
        with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{other.schema_name}" CASCADE')


def test_an_uncommitted_insert_wakes_no_one(
    listening: PostgresOutboxFeed, store: PostgresOperationStore
) -> None:
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.enqueue([OutboxMessage(topic="t.ops", key=b"k", value=b"v", headers={})])
        raise RuntimeError("rolled back")
    assert listening.wait_for_rows(1.0) is False
