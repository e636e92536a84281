"""Helpers for tests that read Kafka messages."""

from confluent_kafka import Consumer, Message, TopicPartition

from graph_ingest.kafka import reader
from graph_ingest.kafka.records import Position
from graph_ingest.settings import Settings


def message_fields(message: Message) -> tuple[bytes, bytes, dict[str, bytes]]:
    """(key, value, headers) of a consumed message, typed."""
    key, value, raw = message.key(), message.value(), message.headers() or []
    assert isinstance(key, bytes) and isinstance(value, bytes)
    items = raw.items() if isinstance(raw, dict) else raw
    return key, value, {k: v for k, v in items if isinstance(v, bytes)}


def position(message: Message) -> Position:
    """(topic, partition, offset) of a delivered or consumed message, typed."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


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
    """(key, value, headers) of every committed message of ``topic`` up to its current end, per
    partition in offset order (``kafka.reader.read_to_end``, typed for the tests)."""
    received = []
    for record in reader.read_to_end(settings.kafka, topic, timeout_s=timeout_s):
        assert isinstance(record.key, bytes) and isinstance(record.value, bytes)
        headers = {k: v for k, v in record.headers if isinstance(v, bytes)}
        received.append((record.key, record.value, headers))
    return received
