"""Helpers for tests that read Kafka messages."""

import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until


def message_fields(message: Message) -> tuple[bytes, bytes, dict[str, bytes]]:
    """(key, value, headers) of a consumed message, typed."""
    key, value, raw = message.key(), message.value(), message.headers() or []
    assert isinstance(key, bytes) and isinstance(value, bytes)
    items = raw.items() if isinstance(raw, dict) else raw
    return key, value, {k: v for k, v in items if isinstance(v, bytes)}


def group_offsets(
    settings: Settings, topic: str, partitions: int
) -> tuple[dict[int, int], dict[int, int]]:
    """(committed offset, end offset) per partition of ``topic`` for the applier group."""
    reader = Consumer(settings.kafka.consumer_config(settings.applier.group_id))
    try:
        listed = [TopicPartition(topic, p) for p in range(partitions)]
        committed = {tp.partition: tp.offset for tp in reader.committed(listed, timeout=30)}
        ends = {tp.partition: reader.get_watermark_offsets(tp, timeout=30)[1] for tp in listed}
    finally:
        reader.close()
    return committed, ends


def read_to_end(
    settings: Settings, topic: str, *, timeout_s: float = 60
) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    """Every committed message of ``topic`` up to its current end, per partition in offset order.

    Reads with the pipeline's consumer settings (``read_committed``). The end of a partition is the
    consumer's partition-EOF event, not the high watermark: transaction markers and aborted records
    sit below the watermark but are never delivered, so a reader counting offsets would wait forever.
    """
    consumer = Consumer(
        settings.kafka.consumer_config(f"t.{uuid.uuid4().hex}", **{"enable.partition.eof": True})
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    received: list[tuple[bytes, bytes, dict[str, bytes]]] = []
    at_end: set[int] = set()

    def every_partition_at_end() -> bool:
        for message in consumer.consume(1000, timeout=0.2):
            error = message.error()
            if error is None:
                received.append(message_fields(message))
            else:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition() or 0)
        return at_end >= set(partitions)

    try:
        wait_until(
            every_partition_at_end, timeout_s=timeout_s, interval_s=0, what=f"end of {topic}"
        )
    finally:
        consumer.close()
    return received
