"""Reading the projector's topics into a rebuild's tables up to fixed offsets: a group-less
consumer (manual assignment; it joins no group and commits nothing, so the live projector's group
never notices), each batch folded by the projector's own fold (``projector.fold_batch``) with
its positions, so a stopped rebuild resumes from the rebuild tables' positions."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from graph_ingest.kafka.consumer import open_consumer, read_retry
from graph_ingest.kafka.errors import translate_kafka_error
from graph_ingest.kafka.headers import headers_of
from graph_ingest.kafka.records import Partition
from graph_ingest.projections.lag_reader import unread_ranges
from graph_ingest.projections.projector import fold_batch
from graph_ingest.projections.read_events import ReadDecoder, ReadEvent
from graph_ingest.projections.read_folds import ReadFolds
from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
"""Told the number of messages folded after each batch."""


def end_offsets(
    settings: Settings, topics: list[str], *, timeout_s: float = 30
) -> dict[Partition, int]:
    """Each partition of ``topics`` that holds messages, and its end offset now."""
    consumer = _consumer(settings)
    try:
        return {
            (topic, partition): high
            for topic in topics
            for partition, (_, high) in unread_ranges(consumer, topic, {}, timeout_s).items()
        }
    except KafkaException as exc:
        raise translate_kafka_error(exc, context="reading end offsets") from exc
    finally:
        consumer.close()


def fold_range(
    settings: Settings,
    tables: ReadTables,
    start: Mapping[Partition, int],
    end: Mapping[Partition, int],
    stop: threading.Event,
    progress: Progress,
) -> bool:
    """Fold every message from ``start`` (inclusive) to ``end`` (exclusive) per partition of
    ``end``; False when ``stop`` ended it first (what was folded stays, with its positions)."""
    pending = {p: e for p, e in end.items() if start.get(p, 0) < e}
    if not pending:
        return True
    consumer = _consumer(settings)
    try:
        consumer.assign([TopicPartition(t, p, start.get((t, p), 0)) for t, p in pending])
        s = settings.projector
        folds, decode = ReadFolds(tables, settings.topics), ReadDecoder(settings.topics)
        while pending:
            if stop.is_set():
                return False
            events = [
                _event(decode, message)
                for message in consumer.consume(s.batch_max_events, s.poll_timeout_s)
                if _wanted(message, pending)
            ]
            if events:
                fold_batch(folds, events)
                progress(len(events))
        return True
    except KafkaException as exc:
        raise translate_kafka_error(exc, context="rebuilding the projections") from exc
    finally:
        consumer.close()


def _wanted(message: Message, pending: dict[Partition, int]) -> bool:
    """Whether to fold ``message``; a partition is done (dropped from ``pending``) at its end
    offset or at the end of what it holds (past the end: only transaction markers were left)."""
    partition = (message.topic() or "", message.partition() or 0)
    end = pending.get(partition)
    if end is None:
        return False
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            del pending[partition]
        elif error.fatal():
            raise translate_kafka_error(error, context="rebuilding the projections")
        else:
            log.warning("rebuild consumer: %s", error)  # librdkafka retries
        return False
    offset = message.offset() or 0
    if offset >= end - 1:
        del pending[partition]
    return offset < end


def _event(decode: ReadDecoder, message: Message) -> ReadEvent:
    headers = headers_of(message)
    return decode(message, headers, read_retry(headers))


def _consumer(settings: Settings) -> Consumer:
    kafka = settings.kafka
    return open_consumer(
        kafka.consumer_config(
            f"{kafka.client_id}.rebuild.{uuid.uuid4().hex}", **{"enable.partition.eof": True}
        ),
        context="rebuilding the projections",
    )


__all__ = ["Progress", "end_offsets", "fold_range"]
