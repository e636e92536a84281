"""The scrape-time collectors against real Kafka and PostgreSQL, on a fresh registry, their
exposition parsed back: the lag equals what the topics and the group's commits say (transaction
markers and aborted records skipped as a read_committed consumer skips them), the store gauges
equal the rows of the tables; Kafka or PostgreSQL unreachable: a fast answer and an error count."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from graph_ingest.dlq.entries import entry_of
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.group_positions import GroupPositions
from graph_ingest.observability.lag import ConsumerLag, GroupLag
from graph_ingest.observability.store_gauges import STATUS_LABELS, StoreGauges, store_gauges
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings import Settings
from graph_ingest.store.postgres.backlog import PostgresBacklog
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.tcp_proxy import free_port
from tests.unit.dlq_envelopes import envelope
from tests.unit.test_scrape_metrics import promtool_check, samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T0_MS = int(time.time() * 1000) - 600_000  # ten minutes ago: lag in seconds is far from 0


def registry_of(collector: ConsumerLag | StoreGauges) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def lag_samples(registry: CollectorRegistry, group: str) -> dict[tuple[str, str, int], float]:
    """(metric, topic, partition) -> value of ``group``'s lag series."""
    return {
        (name.removeprefix("graph_ingest_consumer_lag_"), d["topic"], int(d["partition"])): value
        for (name, labels), value in samples(registry).items()
        if (d := dict(labels)).get("group") == group and "partition" in d
    }


def produce(settings: Settings, topic: str, partition: int, count: int, first: int) -> None:
    """``count`` messages to one partition, timestamped ``T0_MS + first + i`` seconds."""
    producer = Producer(settings.kafka.producer_config())
    for i in range(count):
        producer.produce(topic, b"x", partition=partition, timestamp=T0_MS + (first + i) * 1000)
    assert producer.flush(30) == 0


def commit(settings: Settings, group: str, offsets: list[TopicPartition]) -> None:
    """The group's committed offsets, committed from outside it (no member: a simple commit)."""
    consumer = Consumer(settings.kafka.consumer_config(group))

    def committed() -> bool:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # a fresh broker: the coordinator still loading
            if not exc.args[0].retriable() and exc.args[0].code() not in _COORDINATOR_MOVING:
                raise
            return False
        return True

    try:
        wait_until(committed, timeout_s=60, what=f"{group}'s commit")
    finally:
        consumer.close()


_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS}


@pytest.fixture
def lag_group(pipeline: Pipeline) -> Iterator[str]:
    yield f"{pipeline.settings.applier.group_id}.lag-{uuid.uuid4().hex[:6]}"


def test_the_lag_of_a_group_is_what_its_commits_and_its_topics_say(
    pipeline: Pipeline, lag_group: str
) -> None:
    settings, plans = pipeline.settings, pipeline.settings.topics.plans
    # Given three partitions: one behind, one caught up, one the group never committed
    produce(settings, plans, 0, 5, first=0)
    produce(settings, plans, 1, 3, first=10)
    produce(settings, plans, 2, 4, first=20)
    commit(settings, lag_group, [TopicPartition(plans, 0, 2), TopicPartition(plans, 1, 3)])
    lag = ConsumerLag([GroupLag.of(settings.kafka, lag_group, [plans], cache_s=0)])
    registry = registry_of(lag)
    try:
        # When it is scraped
        before = time.time()
        found = lag_samples(registry, lag_group)
        after = time.time()
        promtool_check(registry)
    finally:
        lag.close()
    # Then each partition's lag in offsets is what it has not consumed
    assert {k: v for k, v in found.items() if k[0] == "offsets"} == {
        ("offsets", plans, 0): 3,
        ("offsets", plans, 1): 0,
        ("offsets", plans, 2): 4,
    }
    # and in seconds the age of the message at its committed offset (or the first one)
    waited = {k[2]: v for k, v in found.items() if k[0] == "seconds"}
    assert waited[1] == 0
    for partition, stamp_ms in ((0, T0_MS + 2000), (2, T0_MS + 20_000)):
        assert before - stamp_ms / 1000 <= waited[partition] <= after - stamp_ms / 1000
    errors = samples(registry)  # (closed: the error counts alone)
    assert errors == {("graph_ingest_consumer_lag_errors_total", (("group", lag_group),)): 0}


class Transactions:
    """A transactional producer writing whole transactions (committed or aborted) to ``topic``."""

    def __init__(self, settings: Settings, topic: str) -> None:
        self.topic = topic
        self._producer = Producer(
            settings.kafka.producer_config(**{"transactional.id": f"lag-test-{uuid.uuid4().hex}"})
        )
        self._producer.init_transactions(30)

    def write(self, partition: int, seconds: list[int], *, abort: bool = False) -> None:
        """One transaction of messages timestamped ``T0_MS + s`` seconds, then its marker."""
        producer = self._producer
        producer.begin_transaction()
        for s in seconds:
            producer.produce(self.topic, b"x", partition=partition, timestamp=T0_MS + s * 1000)
        producer.flush(30)  # written to the log before the abort (else the abort purges them)
        (producer.abort_transaction if abort else producer.commit_transaction)(30)


def test_transaction_markers_and_aborted_records_are_skipped_as_the_group_would(
    pipeline: Pipeline, lag_group: str
) -> None:
    settings, topic = pipeline.settings, pipeline.settings.topics.requests
    transaction = Transactions(settings, topic).write

    # Given partition 0: committed 0,1 (marker 2), aborted 3 (marker 4), committed 5 (marker 6),
    # the group committed at the aborted record; partition 1: committed 0 (marker 1), the group
    # committed at the marker
    transaction(0, [1, 2])
    transaction(0, [3], abort=True)
    transaction(0, [5])
    transaction(1, [7])
    commit(settings, lag_group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 1)])
    lag = ConsumerLag([GroupLag.of(settings.kafka, lag_group, [topic], cache_s=0)])
    try:
        before = time.time()
        found = lag_samples(registry_of(lag), lag_group)
        after = time.time()
    finally:
        lag.close()
    # Then partition 0 waits since the next committed record (offset 5), the aborted one unseen;
    # partition 1 has only a marker left: nothing waits there
    assert found["offsets", topic, 0] == 7 - 3
    assert before - (T0_MS / 1000 + 5) <= found["seconds", topic, 0] <= after - (T0_MS / 1000 + 5)
    assert (found["offsets", topic, 1], found["seconds", topic, 1]) == (0, 0)
    assert (found["offsets", topic, 2], found["seconds", topic, 2]) == (0, 0)  # empty partition


def test_a_group_caught_up_on_transactions_is_read_in_well_under_a_second(
    pipeline: Pipeline, lag_group: str
) -> None:
    settings, topic = pipeline.settings, pipeline.settings.topics.requests
    partitions = settings.topics.request_partitions
    # Given every partition ends with a committed transaction and the group committed at its
    # marker (where a transactional consumer that caught up stands: the workers' steady state)
    transactions = Transactions(settings, topic)
    for partition in range(partitions):
        transactions.write(partition, [partition])
    commit(settings, lag_group, [TopicPartition(topic, p, 1) for p in range(partitions)])
    positions = GroupPositions(settings.kafka, lag_group, [topic])
    try:
        # When it is read, cold then warm
        took_s, found = [], []
        for _ in range(3):
            started = time.monotonic()
            found.append(positions.read(timeout_s=10.0))
            took_s.append(time.monotonic() - started)
    finally:
        positions.close()
    # Then nothing waits (only markers are left), and each read answered at once: no fetch
    # backoff while a marker sits in the fetch queue (librdkafka's fetch.queue.backoff.ms)
    for positions_read in found:
        assert [(p.partition, p.start, p.high, p.waiting_since) for p in positions_read] == [
            (p, 1, 2, None) for p in range(partitions)
        ]
    assert max(took_s) < 0.5, took_s


def test_kafka_unreachable_makes_a_scrape_answer_fast_with_an_error_and_no_lag(
    stack_settings: Settings,
) -> None:
    nowhere = stack_settings.kafka.model_copy(
        update={"bootstrap_servers": f"127.0.0.1:{free_port()}"}
    )
    lag = ConsumerLag(
        [GroupLag.of(nowhere, "lag-nowhere", ["t.nowhere"], cache_s=60, timeout_s=1.0)]
    )
    registry = registry_of(lag)
    try:
        started = time.monotonic()
        first = samples(registry)
        took_s = time.monotonic() - started
        again = samples(registry)  # the failure is remembered: no second wait
        took_again_s = time.monotonic() - started - took_s
    finally:
        lag.close()
    expected = {("graph_ingest_consumer_lag_errors_total", (("group", "lag-nowhere"),)): 1.0}
    assert first == again == expected
    assert took_s < 3.0 and took_again_s < 0.5, (took_s, took_again_s)


def test_store_gauges_equal_the_rows_of_the_tables(pipeline: Pipeline) -> None:
    # Given DLQ index rows of three statuses and two codes, outbox rows (some published),
    # and parked operations
    dlq = [
        (DlqStatus.PENDING_REVIEW, StatusCode.INVALID_ARGUMENT, 3),
        (DlqStatus.PENDING_REVIEW, StatusCode.DATA_LOSS, 1),
        (DlqStatus.REPLAYED, StatusCode.DATA_LOSS, 2),
        (DlqStatus.RESOLVED, StatusCode.INVALID_ARGUMENT, 1),
    ]
    entries = [
        dataclasses.replace(
            entry_of(f"dlq-{status}-{code}-{i}", envelope(original_key=f"k{i}".encode())),
            status=status,
            code=code,
        )
        for status, code, count in dlq
        for i in range(count)
    ]
    outbox = [OutboxMessage("t.anywhere", b"k", b"v", {}) for _ in range(5)]
    with pipeline.store.unit_of_work() as uow:
        uow.put_dlq_entries(entries)
        uow.enqueue(outbox)
    pipeline.execute(
        "UPDATE outbox SET published_at = now() WHERE id IN (SELECT id FROM outbox LIMIT 2)"
    )
    pipeline.execute("UPDATE outbox SET created_at = now() - interval '90 seconds'")
    for i, stage in enumerate(["PARKED", "PARKED", "COMPLETED"]):
        pipeline.execute(
            "INSERT INTO operations (operation_id, space, document_id, expected_revision,"
            " fingerprint, plan_bytes, stage, sequence, created_at, updated_at)"
            " VALUES (%s, 'it', %s, 1, 'v1:x', '\\x00', %s, 1, now(), now())",
            f"op-{i}",
            f"doc-{i}",
            stage,
        )
    gauges = store_gauges(pipeline.settings)
    registry = registry_of(gauges)
    try:
        # When it is scraped
        found = samples(registry)
    finally:
        gauges.close()
    # Then the DLQ gauge is the index rows by status and code (every other pair at 0)
    by_pair = {
        (d["status"], d["code"]): v
        for (name, labels), v in found.items()
        if name == "graph_ingest_dlq_entries" and (d := dict(labels))
    }
    stored = pipeline.sql("SELECT status, code, count(*) FROM dlq_entries GROUP BY 1, 2")
    assert {pair: v for pair, v in by_pair.items() if v} == {
        (STATUS_LABELS[s], c): n for s, c, n in stored
    }
    assert {s for s, _ in by_pair} == {"pending", "replayed", "resolved"}
    assert sum(by_pair.values()) == len(entries) == 7
    # and the oldest pending entry's time, the outbox backlog, its age and the parked count too
    ((oldest_pending,),) = pipeline.sql(
        "SELECT EXTRACT(EPOCH FROM min(dead_lettered_at))::float8 FROM dlq_entries"
        " WHERE status = 'PENDING_REVIEW'"
    )
    assert found["graph_ingest_dlq_oldest_pending_timestamp_seconds", ()] == oldest_pending
    assert found["graph_ingest_outbox_backlog_rows", ()] == 3
    assert 90 <= found["graph_ingest_outbox_oldest_age_seconds", ()] < 150
    assert found["graph_ingest_parked_operations", ()] == 2
    assert found["graph_ingest_store_scrape_errors_total", ()] == 0
    promtool_check(registry)


def test_postgres_unreachable_makes_a_scrape_answer_fast_with_an_error(
    stack_settings: Settings,
) -> None:
    nowhere = stack_settings.postgres.model_copy(update={"port": free_port()})
    gauges = StoreGauges(PostgresBacklog(nowhere, timeout_s=1.0), cache_s=0)
    registry = registry_of(gauges)
    try:
        started = time.monotonic()
        found = samples(registry)
        took_s = time.monotonic() - started
    finally:
        gauges.close()
    assert found == {("graph_ingest_store_scrape_errors_total", ()): 1.0}
    assert took_s < 3.0, took_s
