"""The operation event written straight from the ``Operation`` into Avro binary (operation.v2).

Every plan's journey writes four of these on the applier's main thread. fastavro's generic writer
and the record dict it needs took ~56 µs per event on this machine kind (~1.6 µs per union field);
writing the fields in schema order from the model's attributes, each instant converted once, takes
~20 µs, for the same bytes (``docs/performance.md``, "Fifth round"). Reading stays with fastavro.

The writer is bound to operation.v2 by its fingerprint, so what it writes stays readable whatever
version is current; ``tests/unit/test_operation_writer.py`` holds it to fastavro's bytes and fails
when a newer operation schema is bundled, until this writer follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas.avro_primitives import MARKER, check_long, micros
from graph_ingest.schemas.errors import EncodeError
from graph_ingest.schemas.registry import BUNDLED, OPERATION

WRITTEN_VERSION = 2
_HEADER = MARKER + BUNDLED.version(OPERATION, WRITTEN_VERSION).fingerprint
_STAGE_TIME_FIELDS = {stage: f"stage_times[{stage.value}]" for stage in Stage}
_NULL = 0  # a union's branch 0 ("null"), as a zigzag varint
_SECOND_BRANCH = 2  # branch 1 of ["null", X], as a zigzag varint
_END_OF_BLOCKS = 0
_Branch = TypeVar("_Branch")
# Aware datetimes are equal, and hash alike, exactly when they name the same instant.
_WRITTEN_INSTANTS: dict[datetime, bytes] = {}
_MAX_WRITTEN_INSTANTS = 4096


def _long(value: int, out: bytearray, field: str) -> None:
    """An Avro long: zigzag, then base-128 varint, low groups first."""
    if 0 <= value < 64:  # one byte: most lengths, counts and numbers here
        out.append(value << 1)
        return
    check_long(value, field)
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _string(value: str, out: bytearray, field: str) -> None:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodeError(f"{field}: not encodable as UTF-8: {exc}") from exc
    _long(len(data), out, field)
    out += data


def _optional(
    value: _Branch | None,
    write: Callable[[_Branch, bytearray, str], None],
    out: bytearray,
    field: str,
) -> None:
    """A ``["null", X]`` union: its branch, then ``value`` as ``write`` writes an X."""
    if value is None:
        out.append(_NULL)
    else:
        out.append(_SECOND_BRANCH)
        write(value, out, field)


def _timestamp(value: datetime, out: bytearray, field: str) -> None:
    """An instant as timestamp-micros. A journey's events repeat its stage times (the COMPLETED
    event carries all four, and a batch's plans share them): each instant is converted once,
    ~3 µs saved per repeat."""
    written = _WRITTEN_INSTANTS.get(value)
    if written is None:
        converted = bytearray()
        _long(micros(value, field), converted, field)
        written = bytes(converted)
        if len(_WRITTEN_INSTANTS) >= _MAX_WRITTEN_INSTANTS:
            _WRITTEN_INSTANTS.clear()
        _WRITTEN_INSTANTS[value] = written
    out += written


def _error(error: ErrorInfo, out: bytearray, field: str) -> None:
    _string(error.code, out, f"{field}.code")
    _string(error.error_class, out, f"{field}.error_class")
    _string(error.message, out, f"{field}.message")
    _optional(error.error_id, _string, out, f"{field}.error_id")
    _optional(error.trace_id, _string, out, f"{field}.trace_id")


def write_operation(op: Operation) -> bytes:
    """``op`` as an operation.v2 event: marker, schema fingerprint, then its fields in schema order."""
    out = bytearray(_HEADER)
    _string(op.operation_id, out, "operation_id")
    _string(op.space, out, "space")
    _string(op.document_id, out, "document_id")
    _long(op.expected_revision, out, "expected_revision")
    _string(op.fingerprint, out, "fingerprint")
    # The enumerations are StrEnums: each member is the str of its value (``.value`` costs more).
    _string(op.stage, out, "stage")
    _long(op.sequence, out, "sequence")
    _long(op.attempts, out, "attempts")
    _optional(op.last_error, _error, out, "last_error")
    if op.stage_times:  # a map: one block of entries, then the empty block
        _long(len(op.stage_times), out, "stage_times")
        for stage, at in op.stage_times.items():
            _string(stage, out, "stage_times")
            _timestamp(at, out, _STAGE_TIME_FIELDS[stage])
    out.append(_END_OF_BLOCKS)
    _optional(op.next_retry_at, _timestamp, out, "next_retry_at")
    _optional(op.dlq_id, _string, out, "dlq_id")
    _timestamp(op.created_at, out, "created_at")
    _timestamp(op.updated_at, out, "updated_at")
    _optional(op.plan_kind, _string, out, "plan_kind")
    _optional(op.submission_id, _string, out, "submission_id")
    _optional(op.document_version, _string, out, "document_version")
    _optional(op.retry_tier, _long, out, "retry_tier")
    _optional(op.parked_behind, _string, out, "parked_behind")
    if op.waits:  # an array: one block of items, then the empty block
        _long(len(op.waits), out, "waits")
        for index, wait in enumerate(op.waits):
            _string(wait.dependency, out, f"waits[{index}].dependency")
            _timestamp(wait.started_at, out, f"waits[{index}].started_at")
            _timestamp(wait.ended_at, out, f"waits[{index}].ended_at")
    out.append(_END_OF_BLOCKS)
    return bytes(out)


__all__ = ["WRITTEN_VERSION", "write_operation"]
