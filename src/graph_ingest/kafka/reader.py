"""Read a whole topic once: every committed message from its beginning to its current end; or
one committed message at its offset.

The reader assigns every partition itself (no group membership, nothing committed), so it neither
disturbs nor depends on a consumer group. The end of a partition is the consumer's partition-EOF
event, not the high watermark: transaction markers and aborted records (the outbox relay writes
in transactions) sit below the watermark but are never delivered, so a reader counting offsets
would wait forever.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import open_consumer
from graph_ingest.kafka.errors import KafkaIngestError, translate_kafka_error
from graph_ingest.kafka.headers import headers_of
from graph_ingest.settings.kafka import KafkaSettings

log = logging.getLogger(__name__)

_POLL_S = 0.2
_BATCH = 1000


@dataclass(frozen=True, slots=True)
class TopicRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def read_to_end(
    settings: KafkaSettings, topic: str, *, timeout_s: float = 60.0
) -> list[TopicRecord]:
    """Every committed message of ``topic`` up to its end, per partition in offset order
    (partitions one after another). Raises KafkaIngestError: NOT_FOUND for a topic that does not
    exist, DEADLINE_EXCEEDED when the end is not reached within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    consumer = open_reader(settings, topic)
    try:
        partitions = partitions_of(consumer, topic, timeout_s)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        received: dict[int, list[TopicRecord]] = {p: [] for p in partitions}
        at_end: set[int] = set()
        while at_end < set(partitions):
            if time.monotonic() >= deadline:
                raise KafkaIngestError(
                    f"{topic}: {len(set(partitions) - at_end)} of {len(partitions)} partitions "
                    f"not read to their end within {timeout_s:g}s",
                    code=StatusCode.DEADLINE_EXCEEDED,
                )
            try:
                messages = consumer.consume(_BATCH, timeout=_POLL_S)
            except KafkaException as exc:
                raise translate_kafka_error(exc, context=f"reading {topic}") from exc
            for message in messages:
                error = message.error()
                if error is None:
                    received[message.partition() or 0].append(_record(message))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                elif error.fatal():
                    raise translate_kafka_error(error, context=f"reading {topic}")
                else:  # a broker away for a moment: librdkafka retries, the deadline bounds it
                    log.warning("%s reader: %s", topic, error)
    finally:
        consumer.close()
    return [record for p in partitions for record in received[p]]


def read_at(
    settings: KafkaSettings, topic: str, partition: int, offset: int, *, timeout_s: float = 30.0
) -> TopicRecord | None:
    """The committed message of ``topic`` at (``partition``, ``offset``); None when there is none
    (deleted by retention, compacted away, or aborted). Raises KafkaIngestError
    (DEADLINE_EXCEEDED when neither the message nor the partition's end came within
    ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    consumer = open_reader(settings, topic)
    where = f"{topic}[{partition}]@{offset}"
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        while time.monotonic() < deadline:
            try:
                message = consumer.poll(_POLL_S)
            except KafkaException as exc:
                raise translate_kafka_error(exc, context=f"reading {where}") from exc
            if message is None:
                continue
            error = message.error()
            if error is None:
                return _record(message) if message.offset() == offset else None
            if error.code() == KafkaError._PARTITION_EOF:
                return None
            if error.fatal():
                raise translate_kafka_error(error, context=f"reading {where}")
            log.warning("%s reader: %s", where, error)
    finally:
        consumer.close()
    raise KafkaIngestError(
        f"{where} not read within {timeout_s:g}s", code=StatusCode.DEADLINE_EXCEEDED
    )


def open_reader(settings: KafkaSettings, topic: str) -> Consumer:
    """A consumer in a group of its own that reports each partition's end."""
    config = settings.consumer_config(
        f"{settings.client_id}.reader.{uuid.uuid4().hex}", **{"enable.partition.eof": True}
    )
    return open_consumer(config, context=f"creating a reader of {topic}")


def partitions_of(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        raise translate_kafka_error(exc, context=f"reading the metadata of {topic}") from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise KafkaIngestError(f"topic {topic} does not exist", code=StatusCode.NOT_FOUND)
    return sorted(found.partitions)


def _record(message: Message) -> TopicRecord:
    return TopicRecord(
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value(),
        headers=headers_of(message),
    )


__all__ = ["TopicRecord", "open_reader", "partitions_of", "read_at", "read_to_end"]
