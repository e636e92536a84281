"""Degradation events published through DegradationPublisher: on the real Kafka, and without one."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.kafka.admin import create_topics, delete_topics, topic_specs
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.degradation import DegradationMonitor
from graph_ingest.schemas.codec import decode_degradation_event
from graph_ingest.schemas.messages import DEGRADATION_CONTENT_TYPE
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import KafkaSettings
from tests.kafka_messages import read_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLOSED, OPEN = BreakerState.CLOSED, BreakerState.OPEN
AT = datetime(2026, 3, 24, 10, 30, tzinfo=UTC)


@pytest.fixture
def settings(stack_settings: Settings) -> Iterator[Settings]:
    """This test's own degradation topic, with two partitions, created as `topics create` does."""
    topics = stack_settings.topics.model_copy(
        update={
            "degradation": f"t.{uuid.uuid4().hex[:10]}.degradation",
            "degradation_partitions": 2,
        }
    )
    settings = stack_settings.model_copy(update={"topics": topics})
    create_topics(settings, [s for s in topic_specs(topics) if s.name == topics.degradation])
    yield settings
    delete_topics(settings, [topics.degradation])


def degraded_then_recovered(worker_id: str) -> tuple[DegradationEvent, DegradationEvent]:
    """A worker's PostgreSQL breaker opens, then every breaker stays closed for the window."""
    now = [0.0]
    monitor = DegradationMonitor(
        worker_id,
        stable_s=60.0,
        clock=lambda: now[0],
        wall_clock=lambda: AT + timedelta(seconds=now[0]),
    )
    opened = monitor.observe({"postgres": OPEN, "neo4j": CLOSED})
    assert monitor.observe({"postgres": CLOSED, "neo4j": CLOSED}) is None
    now[0] = 60.0
    recovered = monitor.observe({"postgres": CLOSED, "neo4j": CLOSED})
    assert opened is not None and recovered is not None
    return opened, recovered


def test_published_events_are_read_back_in_order_keyed_by_worker(settings: Settings) -> None:
    opened, recovered = degraded_then_recovered("applier-7")

    with DegradationPublisher(settings) as publisher:
        assert publisher.publish(opened)
        assert publisher.publish(recovered)

    assert publisher.dropped == 0
    received = read_to_end(settings, settings.topics.degradation)
    assert [(key, headers) for key, _, headers in received] == [
        (b"applier-7", {"content-type": DEGRADATION_CONTENT_TYPE.encode()})
    ] * 2
    decoded = [decode_degradation_event(value) for _, value, _ in received]
    assert decoded == [opened, recovered]
    assert [(e.previous_level, e.level) for e in decoded] == [
        (DegradationLevel.L0, DegradationLevel.L1),
        (DegradationLevel.L1, DegradationLevel.L0),
    ]
    assert decoded[0].reason == "circuit breaker open: postgres"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_without_kafka_events_are_dropped_and_the_caller_is_not_held_up() -> None:
    # Given no broker at the address, and a client queue that holds a single message
    kafka = KafkaSettings(
        bootstrap_servers=f"127.0.0.1:{_unused_port()}",
        extra={"queue.buffering.max.messages": 1},
    )
    publisher = DegradationPublisher(Settings(kafka=kafka), flush_timeout_s=0.5)
    opened, recovered = degraded_then_recovered("applier-8")

    # When both events are published, and the publisher closes
    started = time.monotonic()
    taken = publisher.publish(opened)
    refused = publisher.publish(recovered)
    publish_s = time.monotonic() - started
    publisher.close()

    # Then the first waited in the client's queue, the second found it full, and neither raised
    assert (taken, refused) == (True, False)
    assert publish_s < 1.0
    assert publisher.dropped == 2
