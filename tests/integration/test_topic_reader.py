"""kafka.reader.read_to_end against a real broker: committed messages only, every partition."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.admin import TopicSpec, create_topics, delete_topics
from graph_ingest.kafka.errors import KafkaIngestError
from graph_ingest.kafka.reader import read_to_end
from graph_ingest.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def topic(stack_settings: Settings) -> Iterator[str]:
    name = f"t.{uuid.uuid4().hex[:10]}.reader"
    create_topics(stack_settings, [TopicSpec(name=name, partitions=3, replication_factor=1)])
    yield name
    delete_topics(stack_settings, [name])


def test_every_committed_message_is_read_and_aborted_ones_are_not(
    stack_settings: Settings, topic: str
) -> None:
    # Given a committed and an aborted transaction, with one partition left empty
    producer = Producer(
        stack_settings.kafka.producer_config(**{"transactional.id": f"reader-{uuid.uuid4()}"})
    )
    producer.init_transactions(30)
    for commit, values in ((True, [b"a", b"b", b"c"]), (False, [b"aborted"])):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, key=b"k", value=value, partition=0, headers={"h": b"1"})
        producer.produce(topic, key=b"other", value=value + b"-p1", partition=1)
        # Written to the log first: aborted so, the records are there and must be skipped; and an
        # abort sent while the first produce is in flight can reach the coordinator before its
        # partitions do, which refuses it, fatally (INVALID_TXN_STATE, librdkafka#4849)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    # When the topic is read to its end
    records = read_to_end(stack_settings.kafka, topic, timeout_s=60)

    # Then the committed messages are there, per partition in order, and nothing else
    assert [(r.partition, r.key, r.value) for r in records] == [
        (0, b"k", b"a"),
        (0, b"k", b"b"),
        (0, b"k", b"c"),
        (1, b"other", b"c-p1"),
    ]
    assert records[0].headers == (("h", b"1"),)
    assert [r.offset for r in records[:3]] == [0, 1, 2]


def test_an_unknown_topic_is_not_found(stack_settings: Settings) -> None:
    with pytest.raises(KafkaIngestError) as raised:
        read_to_end(stack_settings.kafka, f"t.{uuid.uuid4().hex}.missing", timeout_s=10)
    assert raised.value.code is StatusCode.NOT_FOUND
