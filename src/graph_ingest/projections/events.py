"""Operation events as the projector consumes them: where each came from and the snapshot it
carries, or why it carries none.

Decoding never raises (``kafka.consumer.TypedConsumer`` requires it). A message that is no
operation snapshot — bytes that do not decode, a schema this code does not know — is *skipped*:
logged once with its position and the reason, and its position recorded with the batch's, so the
projector neither stops on it nor reads it again (the write side's DLQ is for work, and the
operations topic is the write side's own output: a bad event there is a bug to read in the log,
not work to replay). A tombstone (no value; compaction's deletion marker) is skipped silently.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

from graph_ingest.domain.operation import Operation
from graph_ingest.kafka.consumer import RetryRead
from graph_ingest.schemas.codec import decode_operation
from graph_ingest.schemas.headers import MessageHeaders

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OperationEvent:
    topic: str
    partition: int
    offset: int
    operation: Operation | None
    """None for a message that carries no snapshot (skipped; its position still counts)."""
    timestamp: datetime | None = None
    """The message's Kafka timestamp (when the relay produced it), if it has one."""


def decode_operation_event(
    message: Message, _headers: MessageHeaders, _retry: RetryRead
) -> OperationEvent:
    topic, partition, offset = message.topic() or "", message.partition() or 0, message.offset()
    value = message.value()
    operation = None
    if value:
        try:
            operation = decode_operation(value)
        except Exception as exc:  # hostile bytes may raise anything in third-party code
            log.warning(
                "%s[%s]@%s is no operation snapshot (%s): skipped", topic, partition, offset, exc
            )
    return OperationEvent(
        topic=topic,
        partition=partition,
        offset=offset or 0,
        operation=operation,
        timestamp=message_time(message),
    )


def message_time(message: Message) -> datetime | None:
    kind, milliseconds = message.timestamp()
    if kind == TIMESTAMP_NOT_AVAILABLE:
        return None
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)


__all__ = ["OperationEvent", "decode_operation_event", "message_time"]
