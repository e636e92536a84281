"""Topic creation and plan publishing against the real local Kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.kafka.admin import (
    TopicSpec,
    create_topics,
    delete_topics,
    ensure_topics,
    pipeline_topics,
    topic_config,
)
from graph_ingest.kafka.errors import TopicMismatch
from graph_ingest.producers.plan_publisher import PlanPublisher
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.schemas.plan_messages import PLAN_CONTENT_TYPE
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from tests.kafka_messages import message_fields
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings(stack_settings: Settings) -> Iterator[Settings]:
    """This test's own topic names (t.<uuid>.*), with small partition counts."""
    tag = uuid.uuid4().hex[:10]
    topics = stack_settings.topics.model_copy(
        update={
            "requests": f"t.{tag}.requests",
            "plans": f"t.{tag}.plans",
            "operations": f"t.{tag}.operations",
            "degradation": f"t.{tag}.degradation",
            "control": f"t.{tag}.control",
            "request_partitions": 2,
            "plan_partitions": 3,
            "operation_partitions": 2,
            "degradation_partitions": 2,
            "operations_segment_ms": 60_000,
            "operations_min_compaction_lag_ms": 1_000,
        }
    )
    settings = stack_settings.model_copy(update={"topics": topics})
    yield settings
    delete_topics(settings, pipeline_topics(topics))


def test_ensure_topics_is_idempotent(settings: Settings) -> None:
    first = ensure_topics(settings)
    second = ensure_topics(settings)

    names = [
        settings.topics.requests,
        settings.topics.plans,
        settings.topics.operations,
        f"{settings.topics.plans}.retry.1s",
        f"{settings.topics.plans}.retry.5s",
        f"{settings.topics.plans}.retry.30s",
        f"{settings.topics.plans}.dlq",
        settings.topics.degradation,
        settings.topics.control,
    ]
    assert [(r.name, r.created) for r in first] == [(name, True) for name in names]
    assert [(r.name, r.created, r.warnings) for r in second] == [
        (name, False, ()) for name in names
    ]
    assert [r.partitions for r in second] == [2, 3, 2, 3, 3, 3, 3, 2, 1]
    assert all(r.replication_factor == settings.topics.replication_factor for r in second)


def test_operation_log_is_compacted_as_configured(settings: Settings) -> None:
    ensure_topics(settings)

    config = topic_config(settings, settings.topics.operations)

    assert config["cleanup.policy"] == "compact"
    assert config["segment.ms"] == "60000"
    assert config["min.compaction.lag.ms"] == "1000"
    assert topic_config(settings, settings.topics.plans)["cleanup.policy"] == "delete"
    assert topic_config(settings, settings.topics.degradation)["cleanup.policy"] == "delete"


def test_existing_operation_log_that_is_not_compacted_is_an_error_with_the_fix(
    settings: Settings,
) -> None:
    create_topics(settings, [TopicSpec(settings.topics.operations, partitions=2)])

    with pytest.raises(TopicMismatch) as caught:
        ensure_topics(settings)

    message = str(caught.value)
    assert f"{settings.topics.operations} has cleanup.policy=delete" in message
    assert "--add-config cleanup.policy=compact" in message


def test_existing_topic_with_fewer_partitions_is_a_warning(settings: Settings) -> None:
    create_topics(settings, [TopicSpec(settings.topics.plans, partitions=1)])

    reports = {report.name: report for report in ensure_topics(settings)}

    plans = reports[settings.topics.plans]
    assert (plans.created, plans.partitions) == (False, 1)
    assert len(plans.warnings) == 1
    assert "has 1 partitions, 3 configured" in plans.warnings[0]
    assert reports[settings.topics.operations].created


def test_published_plans_are_keyed_by_document_with_headers(settings: Settings) -> None:
    ensure_topics(settings)
    alice, acme = Entity("Person", "Alice"), Entity("Company", "Acme")
    plans = [
        sample_plan("topics", f"doc-{i}", f"Alice works at Acme ({i}).", [alice, acme], [])
        for i in range(3)
    ]
    plans.append(
        sample_plan(
            "topics",
            "doc-0",
            "Alice works at Acme, still.",
            [alice, acme],
            [Relation(alice, "WORKS_AT", acme)],
            previous=plans[0].next_state,
        )
    )

    with PlanPublisher(settings) as publisher:
        publisher.publish(plans)

    received = _consume_all(settings, settings.topics.plans, len(plans))
    assert sorted(m[1].operation_id for m in received) == sorted(p.operation_id for p in plans)
    partition_of: dict[str, int] = {}
    for partition, plan, key, headers in received:
        assert key == plan.key.encode()
        assert headers == {
            "operation_id": plan.operation_id.encode(),
            "fingerprint": plan.fingerprint.encode(),
            "content-type": PLAN_CONTENT_TYPE.encode(),
        }
        plan.verify_fingerprint()
        assert partition_of.setdefault(plan.key, partition) == partition
    doc0 = [plan.expected_revision for _, plan, _, _ in received if plan.document_id == "doc-0"]
    assert doc0 == [0, 1]


def _consume_all(
    settings: Settings, topic: str, count: int
) -> list[tuple[int, IngestionPlan, bytes, dict[str, bytes]]]:
    consumer = Consumer(settings.kafka.consumer_config(f"t.{uuid.uuid4().hex}"))
    metadata = consumer.list_topics(topic, timeout=10)
    consumer.assign(
        [TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.topics[topic].partitions]
    )
    received: list[tuple[int, IngestionPlan, bytes, dict[str, bytes]]] = []

    def all_received() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            key, value, headers = message_fields(message)
            received.append((message.partition() or 0, decode_plan(value), key, headers))
        return len(received) >= count

    try:
        wait_until(all_received, timeout_s=30, interval_s=0, what=f"{count} plans on {topic}")
    finally:
        consumer.close()
    return received
