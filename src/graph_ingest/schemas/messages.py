"""The messages graph-ingest publishes, as they leave: topic, key, value and headers, and the
builders of those whose wire form needs nothing above this layer.

Every producer path (the outbox relay, the producers, the degradation publisher) sends an
:class:`OutboxMessage`; a builder here makes the message of one kind, so that each path builds
that kind the same way. The builders of the kinds that carry our own header names (plans, DLQ
messages, ingest requests, degradation events) live beside those names, above this layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graph_ingest.domain.dlq import AttemptRecord, DlqEnvelope, MessageHeader, append_attempt
from graph_ingest.domain.limits import storable_text

log = logging.getLogger(__name__)


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


__all__ = ["OutboxMessage", "dlq_envelope", "message_size", "retry_copy"]
