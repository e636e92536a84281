"""Where a consumer group stands on its topics, read from outside the group: per partition its
committed offset, the watermarks, and the Kafka timestamp of the first message it has not
consumed yet (``observability.lag`` turns them into lag).

One light consumer per group, with the group's ``group.id`` so ``committed()`` answers for it,
that never subscribes (it never joins the group, moves no partition, commits nothing). It reads
``read_committed``, as the workers do: the high watermark it gets is the last stable offset, and a
transaction marker or an aborted record at the committed offset is skipped to the next message
the group will really be given; a partition whose remainder is only markers reaches its end
first, and nothing waits there. The message is read by assigning the lagging partitions at their
committed offsets and consuming one message each, with fetches kept small and never held back
(a marker alone answers in tens of milliseconds, see ``_LIGHT_FETCHES``); the partitions are
unassigned afterwards. Every call is bounded by one timeout, and a Kafka outage raises our
``KafkaIngestError`` (the consumer stays and librdkafka reconnects it for the next read).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import open_consumer
from graph_ingest.kafka.errors import KafkaIngestError, translate_kafka_error
from graph_ingest.settings.kafka import KafkaSettings

_POLL_S = 0.1
_LIGHT_FETCHES = {
    "enable.partition.eof": True,
    "queued.min.messages": 1,
    "queued.max.messages.kbytes": 1024,
    "max.partition.fetch.bytes": 65536,  # a larger first message still comes whole (KIP-74)
    # A partition whose remainder is a transaction marker (a group caught up on transactional
    # topics: the planner's and projector's steady state) is answered by two fetches: the
    # marker, then the end. The marker sits in the fetch queue as one queued message, past
    # queued.min.messages, and librdkafka holds the partition's next fetch for
    # fetch.queue.backoff.ms (1 s by default): 1-3 s per read. Kept short, as is the broker's
    # wait on the empty fetch that reports the end, a read takes tens of milliseconds.
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 10,
}


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    topic: str
    partition: int
    committed: int | None
    """The group's committed offset (the next message it reads); None when it never committed."""
    low: int
    high: int
    """The high watermark as ``read_committed`` sees it (the last stable offset)."""
    waiting_since: float | None
    """Unix time (the message's Kafka timestamp) of the first message the group has not consumed;
    None when none waits (caught up, or only transaction markers left)."""

    @property
    def start(self) -> int:
        """Where the group reads next: its committed offset, the low watermark when it never
        committed or retention deleted what it had not read."""
        return self.low if self.committed is None else max(self.committed, self.low)


class GroupPositions:
    """Constructing it touches nothing; ``read`` opens the consumer the first time. Not for
    concurrent use; ``close`` when done."""

    def __init__(self, settings: KafkaSettings, group: str, topics: Sequence[str]) -> None:
        self.group = group
        self.topics = list(topics)
        self._settings = settings
        self._consumer: Consumer | None = None

    def read(self, timeout_s: float) -> list[PartitionPosition]:
        """Every partition of the group's topics (a topic that does not exist is left out), within
        ``timeout_s``. Raises KafkaIngestError (DEADLINE_EXCEEDED when out of time)."""
        deadline = time.monotonic() + timeout_s
        consumer = self._open()
        context = f"reading the positions of group {self.group}"
        try:
            partitions = [
                TopicPartition(topic, p)
                for topic in self.topics
                for p in _partitions(consumer, topic, _left(deadline, context))
            ]
            if not partitions:
                return []
            committed = _committed(consumer, partitions, _left(deadline, context))
            marks = {
                (tp.topic, tp.partition): _watermarks(consumer, tp, _left(deadline, context))
                for tp in partitions
            }
            positions = [
                PartitionPosition(topic, p, committed[topic, p], *marks[topic, p], None)
                for topic, p in ((tp.topic, tp.partition) for tp in partitions)
            ]
            lagging = [p for p in positions if p.start < p.high]
            waiting = _first_times(consumer, lagging, deadline, context)
        except KafkaException as exc:
            raise translate_kafka_error(exc, context=context) from exc
        return [replace(p, waiting_since=waiting.get((p.topic, p.partition))) for p in positions]

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _open(self) -> Consumer:
        if self._consumer is None:
            config = self._settings.consumer_config(self.group, **_LIGHT_FETCHES)
            self._consumer = open_consumer(config, context=f"reading the lag of {self.group}")
        return self._consumer


def _left(deadline: float, context: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise KafkaIngestError(f"{context}: out of time", code=StatusCode.DEADLINE_EXCEEDED)
    return left


def _partitions(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def _committed(
    consumer: Consumer, partitions: list[TopicPartition], timeout_s: float
) -> dict[tuple[str, int], int | None]:
    found = {}
    for tp in consumer.committed(partitions, timeout=timeout_s):
        if tp.error is not None:
            raise KafkaException(tp.error)
        found[tp.topic, tp.partition] = None if tp.offset == OFFSET_INVALID else tp.offset
    return found


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    marks = consumer.get_watermark_offsets(tp, timeout=timeout_s)
    if marks is None:  # older clients answer a timeout with None
        raise KafkaIngestError(
            f"{tp.topic}[{tp.partition}]: no watermarks in time", code=StatusCode.DEADLINE_EXCEEDED
        )
    low, high = marks
    return int(low), int(high)


def _first_times(
    consumer: Consumer, lagging: list[PartitionPosition], deadline: float, context: str
) -> dict[tuple[str, int], float | None]:
    """Per lagging partition: the timestamp of the first message delivered from its start, or
    None when its end came first."""
    if not lagging:
        return {}
    assigned = [TopicPartition(p.topic, p.partition, p.start) for p in lagging]
    consumer.assign(assigned)
    first: dict[tuple[str, int], float | None] = {}
    pending = {(p.topic, p.partition) for p in lagging}
    try:
        while pending:
            messages = consumer.consume(
                len(pending), timeout=min(_POLL_S, _left(deadline, context))
            )
            for message in messages:
                key = (message.topic() or "", message.partition() or 0)
                if key not in pending:
                    continue
                error = message.error()
                if error is None:
                    first[key] = _timestamp(message.timestamp())
                elif error.code() == KafkaError._PARTITION_EOF:
                    first[key] = None
                elif error.fatal():
                    raise KafkaException(error)
                else:  # a broker away for a moment: librdkafka retries, the deadline bounds it
                    continue
                pending.discard(key)
                consumer.pause([TopicPartition(*key)])
    finally:  # librdkafka keeps a pause across reassignments: lift it before letting go
        consumer.resume(assigned)
        consumer.unassign()
    return first


def _timestamp(stamp: tuple[int, int]) -> float:
    kind, milliseconds = stamp
    return time.time() if kind == TIMESTAMP_NOT_AVAILABLE else milliseconds / 1000


__all__ = ["GroupPositions", "PartitionPosition"]
