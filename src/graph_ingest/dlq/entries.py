"""DLQ index rows, derived from envelopes by one function, pure.

The DLQ topic holds envelopes keyed by DLQ id; a status change (replayed, resolved) or a replay
that failed again writes a newer envelope under the same key. The index row of an entry is
:func:`entry_of` its newest envelope: the routing transaction writes it, and ``dlq reindex``
rebuilds it from the topic with the same function, so both yield the same rows.
"""

from __future__ import annotations

import hashlib
import re

from graph_ingest.domain.dlq import DlqEnvelope, DlqStatus
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_dlq_envelope
from graph_ingest.schemas.headers import Headers
from graph_ingest.store.dlq_index import DlqEntry


def dlq_id_of_operation(operation_id: str) -> str:
    """The DLQ id of an operation's entry: one per operation, whatever the deliveries, so a
    replay that fails again returns to the same entry with its history extended."""
    return _dlq_id(f"operation\0{operation_id}")


def dlq_id_of_position(topic: str, partition: int, offset: int) -> str:
    """The DLQ id of a message that owns no operation (undecodable, or bound to another plan)."""
    return _dlq_id(f"position\0{topic}\0{partition}\0{offset}")


def _dlq_id(seed: str) -> str:
    return "dlq-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]


_DLQ_ID = re.compile(rb"dlq-[0-9a-f]{24}")


def replayed_from(headers: Headers) -> str | None:
    """The DLQ entry a message was replayed from (its ``dlq_replay`` header), or None. A value
    that is no DLQ id (anyone may publish a plan) names no entry: it is never looked up."""
    value = kafka_headers.header_value(headers, kafka_headers.DLQ_REPLAY)
    if value is None or _DLQ_ID.fullmatch(value) is None:
        return None
    return value.decode("ascii")


def entry_of(dlq_id: str, envelope: DlqEnvelope, encoded: bytes | None = None) -> DlqEntry:
    """The index row of ``envelope`` (``encoded``: its bytes, when already encoded)."""
    last = envelope.attempts[-1]
    space, document_id = _document_of(envelope.original_key)
    return DlqEntry(
        dlq_id=dlq_id,
        status=envelope.status,
        operation_id=envelope.operation_id,
        fingerprint=envelope.fingerprint,
        space=space,
        document_id=document_id,
        code=last.code,
        error_class=last.error_class,
        message=last.message,
        parked_behind=envelope.parked_behind,
        original_topic=envelope.original_topic,
        original_partition=envelope.original_partition,
        original_offset=envelope.original_offset,
        attempts=envelope.total_attempts,
        dead_lettered_at=envelope.dead_lettered_at,
        envelope=encode_dlq_envelope(envelope) if encoded is None else encoded,
    )


def _document_of(key: bytes | None) -> tuple[str | None, str | None]:
    """(space, document id) from a plan key ``space/document_id``; (None, None) for a key that is
    not one (an undecodable message may carry anything)."""
    if not key:
        return None, None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None, None
    space, slash, document_id = text.partition("/")
    if not slash or not space or not document_id or "\0" in text:
        return None, None
    return space, document_id


def submission_id_of_envelope(envelope: DlqEnvelope) -> str | None:
    """The submission the dead-lettered message was sent for (its ``submission_id`` header)."""
    headers = [(h.key, h.value) for h in envelope.original_headers]
    value = kafka_headers.header_value(headers, kafka_headers.SUBMISSION_ID)
    return value.decode("utf-8", errors="replace") if value else None


def with_status(entry: DlqEntry, status: DlqStatus, note: str) -> DlqEntry:
    """The entry with a new status (replayed, resolved) and why, its envelope re-encoded."""
    return entry_of(entry.dlq_id, decode_dlq_envelope(entry.envelope).with_status(status, note))


__all__ = [
    "dlq_id_of_operation",
    "dlq_id_of_position",
    "entry_of",
    "replayed_from",
    "submission_id_of_envelope",
    "with_status",
]
