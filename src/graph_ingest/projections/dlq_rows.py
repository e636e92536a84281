"""DLQ entries as the read side holds them (``<schema>_read.dlq_entries``): the newest envelope of
each entry, as the write side's index row of it (``dlq.entries.entry_of``, the one function both
sides derive a row with, so they agree), plus what an operator reads beside it: whether the entry
is a request the planner never planned, its submission, the trace of its last failure, and
where on the DLQ topic the envelope is."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from graph_ingest.dlq.entries import entry_of, submission_id_of_envelope
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.keyed_tables import KeyedTable
from graph_ingest.projections.read_events import DlqEvent
from graph_ingest.store.postgres.params import Row

DLQ_ENTRIES = "dlq_entries"
"""The projection of the DLQ topic (its table, and its name in ``tracking_positions``)."""


@dataclass(frozen=True, slots=True)
class DlqReadEntry:
    """One DLQ entry: its newest envelope, field by field, and the envelope itself."""

    dlq_id: str
    status: DlqStatus
    is_request: bool
    """A planning DLQ entry: an ingest request (submission, space, document) that was never
    planned, so no plan and no operation; the rest are plans."""
    operation_id: str | None
    fingerprint: str | None
    submission_id: str | None
    space: str | None
    document_id: str | None
    code: StatusCode
    error_class: str
    message: str
    trace_id: str
    """The trace of the last failed attempt."""
    attempts: int
    """Every attempt, those folded out of the envelope's bounded history included."""
    parked_behind: str | None
    note: str | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    dead_lettered_at: datetime
    topic: str
    partition: int
    offset: int
    """Where the envelope is on the DLQ topic."""
    envelope: bytes


DLQ_TABLE = KeyedTable(
    DLQ_ENTRIES,
    key="dlq_id",
    types={
        f.name: {
            "is_request": "boolean",
            "attempts": "bigint",
            "original_partition": "int",
            "original_offset": "bigint",
            "dead_lettered_at": "timestamptz",
            "partition": "int",
            "offset": "bigint",
            "envelope": "bytea",
        }.get(f.name, "text")
        for f in fields(DlqReadEntry)
    },
)


def read_entry(event: DlqEvent, requests_topic: str) -> DlqReadEntry | None:
    """The read row of ``event``'s envelope; None for an event without one (skipped)."""
    envelope = event.envelope
    if envelope is None:
        return None
    entry = entry_of(event.dlq_id, envelope, encoded=event.encoded)
    return DlqReadEntry(
        dlq_id=entry.dlq_id,
        status=entry.status,
        is_request=envelope.original_topic == requests_topic,
        operation_id=entry.operation_id,
        fingerprint=entry.fingerprint,
        submission_id=submission_id_of_envelope(envelope),
        space=entry.space,
        document_id=entry.document_id,
        code=entry.code,
        error_class=entry.error_class,
        message=entry.message,
        trace_id=envelope.attempts[-1].trace_id,
        attempts=entry.attempts,
        parked_behind=entry.parked_behind,
        note=envelope.note,
        original_topic=entry.original_topic,
        original_partition=entry.original_partition,
        original_offset=entry.original_offset,
        dead_lettered_at=entry.dead_lettered_at,
        topic=event.topic,
        partition=event.partition,
        offset=event.offset,
        envelope=entry.envelope,
    )


def entry_values(entry: DlqReadEntry) -> dict[str, Any]:
    values = asdict(entry)
    values["status"], values["code"] = entry.status.value, entry.code.value
    return values


def entry_from_row(row: Row) -> DlqReadEntry:
    return DlqReadEntry(
        **{
            **row,
            "status": DlqStatus(row["status"]),
            "code": StatusCode(row["code"]),
            "envelope": bytes(row["envelope"]),
        }
    )


__all__ = [
    "DLQ_ENTRIES",
    "DLQ_TABLE",
    "DlqReadEntry",
    "entry_from_row",
    "entry_values",
    "read_entry",
]
