"""The relay's outbox feed (``PostgresOutboxFeed``) on a real PostgreSQL: its lock, rows, marks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.outbox import OutboxRow
from graph_ingest.store.postgres.outbox import PostgresOutboxFeed
from graph_ingest.store.postgres.store import PostgresOperationStore
from tests.integration.test_postgres_store import pg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
__all__ = ["pg", "store"]  # the fixtures of test_postgres_store: a schema of each test's own

LOCK_KEY = 4242


@pytest.fixture
def feeds(pg: PostgresSettings) -> Iterator[tuple[PostgresOutboxFeed, PostgresOutboxFeed]]:
    first, second = PostgresOutboxFeed(pg), PostgresOutboxFeed(pg)
    yield first, second
    first.close()
    second.close()


def enqueue(store: PostgresOperationStore, count: int) -> None:
    with store.unit_of_work() as uow:
        uow.enqueue(
            [
                OutboxMessage(
                    topic="t.ops",
                    key=f"op-{n}".encode(),
                    value=f"value {n}".encode(),
                    headers={"stage": "PREPARED"},
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
    assert second.try_lock(LOCK_KEY)


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
