"""The messages graph-ingest publishes, as they leave: topic, key, value and headers, and the
builders of the kinds that need no module of their own.

Every producer path (the outbox relay, the producers, the degradation publisher) sends an
:class:`OutboxMessage`; a builder makes the message of one kind, so that each path builds that
kind the same way. Here: an outbox row (an operation event, or any row the relay drains), a
failed plan's retry-tier copy, a DLQ envelope and its DLQ-topic message, a degradation event,
an operator's breaker control.
Plans are built in ``schemas.plan_messages``, ingest requests (first sent or sent again) in
``schemas.request_messages``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from graph_ingest.domain.breaker_control import BreakerControl
from graph_ingest.domain.degradation import DegradationEvent
from graph_ingest.domain.dlq import (
    AttemptRecord,
    DlqEnvelope,
    DlqStatus,
    MessageHeader,
    append_attempt,
)
from graph_ingest.domain.limits import storable_text
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import encode_breaker_control, encode_degradation_event

log = logging.getLogger(__name__)

DEGRADATION_CONTENT_TYPE = "application/vnd.graph-ingest.degradation-event+avro;v=1"
BREAKER_CONTROL_CONTENT_TYPE = "application/vnd.graph-ingest.breaker-control+avro;v=1"


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    topic: str
    key: bytes | None
    value: bytes
    headers: dict[str, str]
    operation_id: str | None = None
    sequence: int | None = None


def message_size(message: OutboxMessage) -> int:
    """Bytes of key, value and headers: what counts against a topic's max.message.bytes, less
    the record's framing (a few dozen bytes)."""
    return (
        len(message.key or b"")
        + len(message.value)
        + sum(len(k.encode()) + len(v.encode()) for k, v in message.headers.items())
    )


def retry_copy(
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: Sequence[tuple[str, bytes | None]],
    *,
    operation_id: str | None,
) -> OutboxMessage:
    """The copy of a failed plan on a retry tier: its key and value as consumed, and ``headers``
    (its own with the retry headers of this copy) as the outbox stores them."""
    return OutboxMessage(
        topic=topic,
        key=key,
        value=value,
        headers=_text_headers(headers),
        operation_id=operation_id,
    )


def _text_headers(headers: Sequence[tuple[str, bytes | None]]) -> dict[str, str]:
    """Headers as the outbox stores them (UTF-8 text, made storable: JSONB refuses a NUL, which
    anyone publishing a plan may send; the last of a repeated name wins). One that is not text is
    left off the copy and logged: the DLQ envelope keeps the original bytes."""
    text: dict[str, str] = {}
    for key, value in headers:
        if value is None:
            continue
        try:
            text[storable_text(key)] = storable_text(value.decode("utf-8"))
        except UnicodeDecodeError:
            log.warning("header %s is not UTF-8: left off the retry copy", storable_text(key))
    return text


def dlq_envelope(
    origin: tuple[str, int | None, int | None],
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
    attempts: Sequence[AttemptRecord],
    *,
    at: datetime,
    uncounted: int = 0,
    operation_id: str | None = None,
    fingerprint: str | None = None,
    parked_behind: str | None = None,
) -> DlqEnvelope:
    """The DLQ envelope of a message that failed (a plan, or an ingest request): where it was
    first consumed (``origin``: topic, partition, offset), its key, value and headers as they
    were, and its attempts — past the history's limit the first and the latest are kept and the
    others counted, with ``uncounted`` earlier attempts that were never recorded."""
    history: tuple[AttemptRecord, ...] = ()
    folded = uncounted
    for record in attempts:
        history, folded = append_attempt(history, folded, record)
    topic, partition, offset = origin
    return DlqEnvelope(
        original_topic=topic,
        original_partition=partition,
        original_offset=offset,
        original_key=key,
        original_value=value,
        original_headers=tuple(MessageHeader(key=k, value=v) for k, v in headers),
        operation_id=operation_id,
        fingerprint=fingerprint,
        attempts=history,
        folded_attempts=folded,
        dead_lettered_at=at,
        parked_behind=parked_behind,
    )


def outbox_message(
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: Mapping[str, Any] | None,
    operation_id: str | None,
    sequence: int | None,
) -> OutboxMessage:
    """An outbox row as a Kafka message. JSONB header values become strings; ``operation_id`` and
    ``sequence`` are added as headers from their columns unless the row's headers carry them."""
    out = {str(k): v if isinstance(v, str) else str(v) for k, v in (headers or {}).items()}
    if operation_id is not None:
        out.setdefault(kafka_headers.OPERATION_ID, operation_id)
    if sequence is not None:
        out.setdefault(kafka_headers.SEQUENCE, str(sequence))
    return OutboxMessage(
        topic=topic,
        key=bytes(key) if key is not None else None,
        value=bytes(value),
        headers=out,
        operation_id=operation_id,
        sequence=sequence,
    )


class DlqEntryFields(Protocol):
    """What a DLQ-topic message is made of: the fields it reads of a DLQ index row
    (``store.dlq_index.DlqEntry``), which the wire cannot import."""

    @property
    def dlq_id(self) -> str: ...
    @property
    def status(self) -> DlqStatus: ...
    @property
    def code(self) -> StatusCode: ...
    @property
    def operation_id(self) -> str | None: ...
    @property
    def envelope(self) -> bytes: ...


def dlq_message(dlq_topic: str, entry: DlqEntryFields) -> OutboxMessage:
    """The DLQ-topic message of an entry's newest envelope (keyed by DLQ id: the topic's newest
    message of a key is the entry)."""
    return OutboxMessage(
        topic=dlq_topic,
        key=entry.dlq_id.encode("utf-8"),
        value=entry.envelope,
        headers={
            kafka_headers.DLQ_ID: entry.dlq_id,
            kafka_headers.DLQ_STATUS: entry.status.value,
            kafka_headers.ERROR_CODE: entry.code.value,
        },
        operation_id=entry.operation_id,
    )


def degradation_message(event: DegradationEvent, topic: str) -> OutboxMessage:
    """The Kafka message of a degradation event: keyed by worker id, so a worker's events keep
    their order on one partition."""
    return OutboxMessage(
        topic=topic,
        key=event.worker_id.encode("utf-8"),
        value=encode_degradation_event(event),
        headers={kafka_headers.CONTENT_TYPE: DEGRADATION_CONTENT_TYPE},
    )


def breaker_control_message(control: BreakerControl, topic: str) -> OutboxMessage:
    """The Kafka message of a breaker control: keyed by dependency, so the compacted control
    topic keeps the latest word on each breaker."""
    return OutboxMessage(
        topic=topic,
        key=control.dependency.encode("utf-8"),
        value=encode_breaker_control(control),
        headers={kafka_headers.CONTENT_TYPE: BREAKER_CONTROL_CONTENT_TYPE},
    )


__all__ = [
    "BREAKER_CONTROL_CONTENT_TYPE",
    "DEGRADATION_CONTENT_TYPE",
    "DlqEntryFields",
    "OutboxMessage",
    "breaker_control_message",
    "degradation_message",
    "dlq_envelope",
    "dlq_message",
    "message_size",
    "outbox_message",
    "retry_copy",
]
