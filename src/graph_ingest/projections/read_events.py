"""Every message the projector consumes, decoded by its topic: operation snapshots
(``projections.events``), DLQ envelopes and degradation events.

Decoding never raises (``kafka.consumer.TypedConsumer`` requires it). A message that does not
decode is *skipped* as an operation event is: logged once with its position and the reason, its
payload None, its position recorded with the batch's, so a poison message on any topic neither
stops the projector nor is read again. A tombstone (no value) is skipped silently.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from confluent_kafka import Message

from graph_ingest.domain.degradation import DegradationEvent
from graph_ingest.domain.dlq import DlqEnvelope
from graph_ingest.kafka.consumer import RetryRead
from graph_ingest.projections.events import OperationEvent, decode_operation_event, message_time
from graph_ingest.schemas.codec import decode_degradation_event, decode_dlq_envelope
from graph_ingest.schemas.headers import MessageHeaders
from graph_ingest.settings.kafka import TopicSettings

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DlqEvent:
    """One message of the DLQ topic: the newest envelope of entry ``dlq_id`` so far."""

    topic: str
    partition: int
    offset: int
    dlq_id: str
    envelope: DlqEnvelope | None
    """None for a message that carries no envelope (skipped; its position still counts)."""
    encoded: bytes = b""
    timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class DegradationChange:
    """One message of the degradation topic: a worker's change of level."""

    topic: str
    partition: int
    offset: int
    event: DegradationEvent | None
    """None for a message that carries no event (skipped; its position still counts)."""
    timestamp: datetime | None = None


ReadEvent = OperationEvent | DlqEvent | DegradationChange


class ReadDecoder:
    """Decodes a message of any of the projector's topics (by its topic) into a ReadEvent."""

    def __init__(self, topics: TopicSettings) -> None:
        self._dlq = topics.dlq
        self._degradation = topics.degradation

    def __call__(self, message: Message, headers: MessageHeaders, retry: RetryRead) -> ReadEvent:
        topic = message.topic()
        if topic == self._dlq:
            key = (message.key() or b"").decode("utf-8", errors="replace")
            envelope = _decoded(message, decode_dlq_envelope, "DLQ envelope")
            if envelope is not None and not key:  # the relay keys every envelope by its DLQ id
                log.warning("%s[%s]@%s: a DLQ envelope without a key: skipped", *_position(message))
                envelope = None
            return DlqEvent(
                *_position(message),
                dlq_id=key,
                envelope=envelope,
                encoded=message.value() or b"",
                timestamp=message_time(message),
            )
        if topic == self._degradation:
            event = _decoded(message, decode_degradation_event, "degradation event")
            return DegradationChange(*_position(message), event, message_time(message))
        return decode_operation_event(message, headers, retry)


def _position(message: Message) -> tuple[str, int, int]:
    return message.topic() or "", message.partition() or 0, message.offset() or 0


def _decoded(message: Message, decode: Callable[[bytes], T], what: str) -> T | None:
    value = message.value()
    if not value:
        return None
    try:
        return decode(value)
    except Exception as exc:  # hostile bytes may raise anything in third-party code
        topic, partition, offset = _position(message)
        log.warning("%s[%s]@%s is no %s (%s): skipped", topic, partition, offset, what, exc)
        return None


def skipped(event: ReadEvent) -> ReadEvent:
    """The event without its payload: folding it only records its position."""
    if isinstance(event, OperationEvent):
        return dataclasses.replace(event, operation=None)
    if isinstance(event, DlqEvent):
        return dataclasses.replace(event, envelope=None)
    return dataclasses.replace(event, event=None)


def describe(event: ReadEvent) -> str:
    """``topic[partition]@offset`` and what the event is about, for a log line."""
    where = f"{event.topic}[{event.partition}]@{event.offset}"
    if isinstance(event, OperationEvent):
        return f"{where} op={event.operation.operation_id if event.operation else None}"
    if isinstance(event, DlqEvent):
        return f"{where} dlq={event.dlq_id}"
    return f"{where} worker={event.event.worker_id if event.event else None}"


__all__ = ["DegradationChange", "DlqEvent", "ReadDecoder", "ReadEvent", "describe", "skipped"]
