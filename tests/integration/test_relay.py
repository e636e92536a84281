"""The outbox relay against the real local PostgreSQL and Kafka."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry
from psycopg import sql

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.hooks import Hooks, relay_loop
from graph_ingest.kafka.admin import TopicSpec, create_topics, delete_topics
from graph_ingest.observability.metrics import PipelineMetrics
from graph_ingest.producers import outbox_purge
from graph_ingest.producers.relay import OutboxRelay, advisory_lock_key
from graph_ingest.settings import Settings
from graph_ingest.store.migrate import migrate
from graph_ingest.waiting import wait_until
from tests.kafka_messages import message_fields, read_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@dataclass(frozen=True)
class Outbox:
    settings: Settings
    topic: str

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.settings.postgres.conninfo(), autocommit=True)

    def fill(
        self, operations: int, events: int, headers: str = "{}", first_sequence: int = 1
    ) -> list[tuple[str, int]]:
        """Rows for ``operations`` operations x ``events`` sequences from ``first_sequence``,
        interleaved by id."""
        rows = [
            (self.topic, f"op-{o}".encode(), f"op-{o}:{s}".encode(), headers, f"op-{o}", s)
            for s in range(first_sequence, first_sequence + events)
            for o in range(operations)
        ]
        with self.connect() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO outbox (topic, message_key, message_value, headers, operation_id,"
                " sequence) VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )
        return [(str(r[4]), int(r[5])) for r in rows]

    def terminate_relay_session(self) -> None:
        """End the PostgreSQL session that holds this schema's relay lock, as a crash of that
        backend or a network cut would: the lock goes with it."""
        key = advisory_lock_key(self.settings.postgres.schema_name) & 0xFFFF_FFFF_FFFF_FFFF
        with self.connect() as conn:
            row = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1",
                (key >> 32, key & 0xFFFF_FFFF),
            ).fetchone()
        assert row is not None and row[0], "no session holds the relay lock"

    def unpublished(self) -> int:
        with self.connect() as conn:
            row = conn.execute("SELECT count(*) FROM outbox WHERE published_at IS NULL").fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
def outbox(stack_settings: Settings) -> Iterator[Outbox]:
    """This test's own schema (t_<uuid>, migrated) and operations topic (t.<uuid>.operations)."""
    tag = uuid.uuid4().hex[:10]
    topics = stack_settings.topics.model_copy(update={"operations": f"t.{tag}.operations"})
    settings = stack_settings.model_copy(
        update={
            "topics": topics,
            "postgres": stack_settings.postgres.model_copy(update={"schema_name": f"t_{tag}"}),
            "relay": stack_settings.relay.model_copy(
                update={"batch_size": 37, "idle_poll_interval_s": 0.05, "flush_timeout_s": 10.0}
            ),
        }
    )
    create_topics(settings, [TopicSpec(topics.operations, partitions=3)])
    migrate(settings.postgres)
    yield Outbox(settings, topics.operations)
    delete_topics(settings, [topics.operations])
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(settings.postgres.schema_name)
            )
        )


def consume(
    settings: Settings, topic: str, count: int
) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    """Read ``count`` messages from the beginning of every partition: (key, value, headers)."""
    consumer = Consumer(settings.kafka.consumer_config(f"t.{uuid.uuid4().hex}"))
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    received: list[tuple[bytes, bytes, dict[str, bytes]]] = []

    def enough() -> bool:
        for message in consumer.consume(500, timeout=0.2):
            if message.error() is None:
                received.append(message_fields(message))
        return len(received) >= count

    try:
        wait_until(enough, timeout_s=60, interval_s=0, what=f"{count} messages on {topic}")
        # Anything beyond ``count`` would be a duplicate: give it a moment to show up.
        for message in consumer.consume(500, timeout=1.0):
            if message.error() is None:
                received.append(message_fields(message))
    finally:
        consumer.close()
    return received


def drain(relay: OutboxRelay) -> int:
    total = 0
    while count := relay.run_once():
        total += count
    return total


def test_relay_publishes_every_row_once_in_order_per_key_and_marks_it(outbox: Outbox) -> None:
    expected = outbox.fill(operations=12, events=10, headers='{"content-type": "test"}')

    with OutboxRelay(outbox.settings) as relay:
        assert relay.backlog() == 120
        published = drain(relay)
        again = relay.run_once()
        backlog = relay.backlog()

    assert (published, again, backlog) == (120, 0, 0)
    assert outbox.unpublished() == 0
    received = consume(outbox.settings, outbox.topic, len(expected))
    assert len(received) == len(expected)  # no duplicates without a crash
    sequences: dict[str, list[int]] = defaultdict(list)
    for key, value, headers in received:
        operation_id, sequence = value.decode().split(":")
        assert key == operation_id.encode()
        assert headers == {
            "content-type": b"test",
            "operation_id": operation_id.encode(),
            "sequence": sequence.encode(),
        }
        sequences[operation_id].append(int(sequence))
    assert dict(sequences) == {f"op-{o}": list(range(1, 11)) for o in range(12)}


def test_an_idle_relay_stops_without_waiting_out_its_idle_wait(outbox: Outbox) -> None:
    relay_settings = outbox.settings.relay.model_copy(update={"idle_poll_interval_s": 60.0})
    stop = threading.Event()
    with OutboxRelay(outbox.settings.model_copy(update={"relay": relay_settings})) as relay:
        worker = threading.Thread(target=relay.run, args=(stop,))
        worker.start()
        wait_until(lambda: relay.is_active, timeout_s=30, what="the relay to take its lock")
        time.sleep(0.5)  # nothing to publish: it waits for rows, for up to a minute
        stop.set()
        worker.join(timeout=10)
        assert not worker.is_alive()


def test_rows_stay_unpublished_when_the_broker_is_unreachable(
    outbox: Outbox, caplog: pytest.LogCaptureFixture
) -> None:
    outbox.fill(operations=3, events=4)
    dead = outbox.settings.model_copy(
        update={
            "kafka": outbox.settings.kafka.model_copy(
                update={"bootstrap_servers": f"127.0.0.1:{_free_port()}"}
            ),
            "relay": outbox.settings.relay.model_copy(
                update={"retry_initial_backoff_s": 0.1, "retry_max_backoff_s": 0.2}
            ),
        }
    )
    relay = OutboxRelay(
        dead,
        producer_overrides={"message.timeout.ms": 1500},
    )
    relay.start()
    try:
        with pytest.raises(GraphIngestError) as caught:
            relay.run_once()
        assert caught.value.code.is_transient
        assert outbox.unpublished() == 12

        stop = threading.Event()
        caplog.set_level(logging.WARNING, logger="graph_ingest.producers.relay")
        worker = threading.Thread(target=relay.run, args=(stop,))
        worker.start()
        wait_until(
            lambda: "publishing failed (attempt 2" in caplog.text,
            timeout_s=30,
            what="the relay to log two failed attempts",
        )
        stop.set()
        worker.join(timeout=30)
        assert not worker.is_alive()
    finally:
        relay.close()

    assert outbox.unpublished() == 12
    assert relay.published_total == 0

    # The same rows go out, in full, once the broker is reachable.
    with OutboxRelay(outbox.settings) as healthy:
        assert drain(healthy) == 12
    assert len(consume(outbox.settings, outbox.topic, 12)) == 12


def test_a_row_that_cannot_be_published_holds_back_the_rows_after_it(outbox: Outbox) -> None:
    outbox.fill(operations=1, events=3)
    with outbox.connect() as conn:
        conn.execute(
            "INSERT INTO outbox (topic, message_key, message_value, operation_id, sequence)"
            " VALUES (%s, %s, %s, %s, %s)",
            (outbox.topic, b"op-big", b"x" * 10_000, "op-big", 1),
        )
    outbox.fill(operations=1, events=3)  # rows after it: they must not go out before it
    relay = OutboxRelay(outbox.settings, producer_overrides={"message.max.bytes": 4096})
    relay.start()
    try:
        for _ in range(2):  # the rows before it go out once, not on every retry
            with pytest.raises(GraphIngestError) as caught:
                relay.run_once()
            assert caught.value.code is StatusCode.INVALID_ARGUMENT
            assert "MSG_SIZE_TOO_LARGE" in str(caught.value)
            assert outbox.unpublished() == 4
    finally:
        relay.close()

    assert relay.published_total == 3
    assert [value for _, value, _ in consume(outbox.settings, outbox.topic, 3)] == [
        b"op-0:1",
        b"op-0:2",
        b"op-0:3",
    ]


def test_one_active_relay_per_schema(outbox: Outbox, caplog: pytest.LogCaptureFixture) -> None:
    outbox.fill(operations=2, events=3)
    caplog.set_level(logging.INFO, logger="graph_ingest.producers.relay")
    first, second = OutboxRelay(outbox.settings), OutboxRelay(outbox.settings)
    first.start()
    second.start()
    try:
        assert first.run_once() == 6
        outbox.fill(operations=2, events=1)

        assert second.run_once() == 0
        assert (first.is_active, second.is_active) == (True, False)
        assert "standing by" in caplog.text
        assert outbox.unpublished() == 2

        first.close()  # its connection, and with it the lock, goes away (asynchronously)
        wait_until(second.run_once, timeout_s=10, what="the standby relay to take over")
        assert second.is_active
    finally:
        first.close()
        second.close()
    assert outbox.unpublished() == 0


HELD_CLIENT_ID = "relay-held-before-confirming"


@dataclass(frozen=True)
class Hold:
    reached: threading.Event
    release: threading.Event


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hold]:
    """Kafka clients with client id HELD_CLIENT_ID stop at their first flush or transaction commit
    until released: a relay using one has produced its batch but not yet confirmed it. With a long
    ``linger.ms`` the batch is still in the client then, so it reaches the broker only on release,
    like deliveries still in flight from a relay that has lost its lock."""
    hold = Hold(threading.Event(), threading.Event())

    class ClientHeldBeforeConfirming(Producer):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__(config)
            self.armed = config.get("client.id") == HELD_CLIENT_ID

        def wait_for_release(self) -> None:
            if self.armed:
                self.armed = False
                hold.reached.set()
                assert hold.release.wait(60), "the test never released the held relay"

        def flush(self, *args: Any) -> int:
            self.wait_for_release()
            return super().flush(*args)

        def commit_transaction(self, *args: Any) -> None:
            self.wait_for_release()
            super().commit_transaction(*args)

    monkeypatch.setattr("graph_ingest.kafka.producer.Producer", ClientHeldBeforeConfirming)
    yield hold
    hold.release.set()


def test_a_relay_that_lost_its_lock_cannot_land_an_older_snapshot_after_its_successor(
    outbox: Outbox, hold: Hold
) -> None:
    # Given relay A has produced sequence 1 of every operation and not yet confirmed it
    expected = outbox.fill(operations=6, events=1)
    deposed = OutboxRelay(
        outbox.settings,
        producer_overrides={"client.id": HELD_CLIENT_ID, "linger.ms": 30_000},
    )
    successor = OutboxRelay(outbox.settings)
    outcome: list[int | GraphIngestError] = []

    def run_deposed() -> None:
        try:
            outcome.append(deposed.run_once())
        except GraphIngestError as exc:
            outcome.append(exc)

    deposed.start()
    successor.start()
    worker = threading.Thread(target=run_deposed)
    try:
        worker.start()
        assert hold.reached.wait(30), "relay A never reached its flush or commit"

        # When A's PostgreSQL session dies, sequence 2 is written, and the standby B takes over
        outbox.terminate_relay_session()
        expected += outbox.fill(operations=6, events=1, first_sequence=2)
        published = wait_until(successor.run_once, timeout_s=20, what="relay B to take over")
        published += drain(successor)
        # and only then are A's in-flight deliveries released
        hold.release.set()
        worker.join(timeout=60)
        assert not worker.is_alive()
    finally:
        hold.release.set()
        deposed.close()
        successor.close()

    # Then, read committed, every operation's last record is its newest snapshot (what compaction
    # keeps), and every (operation, sequence) is there
    last_sequence: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    for _key, value, _headers in read_to_end(outbox.settings, outbox.topic):
        operation_id, sequence = value.decode().split(":")
        last_sequence[operation_id] = int(sequence)
        seen.add((operation_id, int(sequence)))
    assert last_sequence == {f"op-{o}": 2 for o in range(6)}
    assert seen == set(expected)
    # and B published every row once, while A stood down without publishing or marking any
    assert published == 12
    assert outcome == [0]
    assert (deposed.is_active, deposed.published_total) == (False, 0)
    assert outbox.unpublished() == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _published_ages(outbox: Outbox) -> dict[int, str]:
    """Every row by id: 'unpublished', or 'old' / 'young' for one published more or less than
    an hour ago."""
    with outbox.connect() as conn:
        rows = conn.execute(
            "SELECT id, CASE WHEN published_at IS NULL THEN 'unpublished'"
            " WHEN published_at < now() - interval '1 hour' THEN 'old' ELSE 'young' END"
            " FROM outbox ORDER BY id"
        ).fetchall()
    return {int(row[0]): str(row[1]) for row in rows}


def _publish_long_ago(outbox: Outbox, ids: list[int], hours: int) -> None:
    with outbox.connect() as conn:
        conn.execute(
            "UPDATE outbox SET published_at = now() - make_interval(hours => %s) WHERE id = ANY(%s)",
            (hours, ids),
        )


def test_published_rows_past_their_retention_are_deleted_longest_published_first(
    outbox: Outbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    outbox.fill(operations=3, events=3)
    monkeypatch.setattr(outbox_purge, "PURGE_ROWS", 2)
    with OutboxRelay(outbox.settings) as relay:
        assert drain(relay) == 9
        outbox.fill(operations=2, events=1, first_sequence=4)  # left unpublished
        ids = sorted(_published_ages(outbox))
        # published two, three and four hours ago; the rest within the hour's retention
        for hours, published in ((2, ids[6:8]), (3, ids[0:1]), (4, ids[3:5])):
            _publish_long_ago(outbox, published, hours)
        before = _published_ages(outbox)
        assert list(before.values()).count("old") == 5

        first = relay.purge_published()
        after_first = set(_published_ages(outbox))
        counts = [first, relay.purge_published(), relay.purge_published(), relay.purge_published()]

    assert counts == [2, 2, 1, 0]
    assert set(before) - after_first == {ids[3], ids[4]}  # the four hours ago first
    after = _published_ages(outbox)
    assert after == {i: age for i, age in before.items() if age != "old"}
    assert list(after.values()).count("unpublished") == 2


def test_a_running_relay_deletes_every_row_past_its_retention_not_one_statement_per_interval(
    outbox: Outbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an interval of an hour, only the relay's going on at once after a full statement
    can delete seven rows two per statement; its metrics count the seven."""
    outbox.fill(operations=7, events=1)
    with OutboxRelay(outbox.settings) as earlier:
        assert drain(earlier) == 7
    _publish_long_ago(outbox, list(_published_ages(outbox)), hours=2)
    outbox.fill(operations=1, events=1)  # published by the running relay, and kept
    relay_settings = outbox.settings.relay.model_copy(update={"purge_interval_s": 3600.0})
    monkeypatch.setattr(outbox_purge, "PURGE_ROWS", 2)
    stop = threading.Event()
    registry, loop = CollectorRegistry(), relay_loop(outbox.settings.postgres.schema_name)
    hooks = Hooks(loop, PipelineMetrics(registry, "relay", worker_id=loop))
    settings = outbox.settings.model_copy(update={"relay": relay_settings})
    with OutboxRelay(settings, hooks=hooks) as relay:
        worker = threading.Thread(target=relay.run, args=(stop,))
        worker.start()
        try:
            wait_until(
                lambda: list(_published_ages(outbox).values()) == ["young"],
                timeout_s=30,
                what="the seven old rows deleted, the new one published",
            )
        finally:
            stop.set()
            worker.join(timeout=30)
    assert not worker.is_alive()
    assert registry.get_sample_value("graph_ingest_outbox_purged_rows_total") == 7
    assert registry.get_sample_value("graph_ingest_outbox_purge_failures_total") == 0
