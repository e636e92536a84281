"""Avro codec for the ingest request (``ingest.requests``), the plan event (``ingestion.plans``), the
operation event (``ingestion.operations``), the DLQ envelope (``ingestion.plans.dlq``), the
degradation event (``ingestion.degradation``) and the breaker control (``ingestion.control``).

Wire format: Avro *single-object encoding* (Avro specification, "Single-object encoding")::

    C3 01 | fingerprint (8 bytes) | Avro binary body

* ``C3 01`` is the marker (format version 1);
* the fingerprint is the CRC-64-AVRO (Rabin) fingerprint of the writer schema's Parsing Canonical
  Form, little-endian — so every message names the exact schema it was written with;
* the body is the record in Avro binary encoding, written with that schema.

Decoding reads the header, finds the writer schema in the :mod:`registry` catalogue (every bundled
``<subject>.v<N>.avsc``, parsed once at import), checks that it belongs to the expected subject and
resolves the body to the subject's *current* schema (Avro schema resolution). Evolution rules:

* add a field only with a default, never change a field's type, never rename without an alias;
* add the new version as ``<subject>.v<N+1>.avsc`` and keep the old files: a reader must know every
  writer schema it may meet, so deploy readers before writers (an unknown fingerprint is a
  :class:`DecodeError`, not a guess).

Choices the schemas make:

* **Enumerations are strings** (``kind``, ``stage``, fact ``kind``, error ``code``; the values are in
  each field's ``doc``). An Avro enum fails schema resolution for every symbol the reader does not
  know, and a ``default`` symbol would silently turn an unknown stage into some other stage. As
  strings, an old reader meets a new value at pydantic validation: a loud :class:`DecodeError`.
* **Property values** are the union ``null | boolean | long | double | string | array<boolean |
  long | double | string>``. The writer names the branch with fastavro's ``(branch, value)`` tuple
  notation instead of letting fastavro guess: the guess maps ``True`` to ``boolean`` and ``1.0`` to
  ``double`` correctly, but sends an int beyond 64 bits to ``double`` (a silent change of value);
  named branches make that an :class:`EncodeError`. ``True``, ``1`` and ``1.0`` come back as
  ``bool``, ``int`` and ``float``.
* **Raw bytes** (the DLQ envelope's original key, value and header values) are Avro ``bytes``,
  kept exactly: NUL, invalid UTF-8 and all.
* **Datetimes** are ``timestamp-micros``. Only aware datetimes are accepted (fastavro would read a
  naive one as local time); they come back as aware UTC datetimes, the same instant.

The codec does not verify the plan fingerprint (the applier does, with
``IngestionPlan.verify_fingerprint``); a decoded plan recomputes to the fingerprint it was encoded
with. Every failure to decode — short or unmarked bytes, unknown fingerprint, bad body, content that
fails domain validation — is a :class:`DecodeError` carrying the raw bytes for the DLQ.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, TypeVar

from fastavro import schemaless_reader, schemaless_writer
from pydantic import BaseModel, ValidationError

from graph_ingest.domain.breaker_control import BreakerControl
from graph_ingest.domain.degradation import DegradationEvent
from graph_ingest.domain.dlq import DlqEnvelope
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.request import IngestRequest
from graph_ingest.schemas.avro_primitives import HEADER_SIZE, MARKER, check_long, micros
from graph_ingest.schemas.errors import DecodeError, EncodeError
from graph_ingest.schemas.operation_writer import write_operation
from graph_ingest.schemas.registry import (
    BREAKER_CONTROL,
    BUNDLED,
    DEGRADATION_EVENT,
    DLQ_ENVELOPE,
    INGEST_REQUEST,
    OPERATION,
    PLAN,
    SchemaCatalogue,
    SchemaVersion,
)

__all__ = [
    "HEADER_SIZE",
    "MARKER",
    "DecodeError",
    "EncodeError",
    "decode_breaker_control",
    "decode_degradation_event",
    "decode_dlq_envelope",
    "decode_ingest_request",
    "decode_operation",
    "decode_plan",
    "encode_breaker_control",
    "encode_degradation_event",
    "encode_dlq_envelope",
    "encode_ingest_request",
    "encode_operation",
    "encode_plan",
    "read_single_object",
    "write_single_object",
]

_M = TypeVar("_M", bound=BaseModel)


# --- public API ---------------------------------------------------------------------------------


def encode_ingest_request(request: IngestRequest) -> bytes:
    return write_single_object(BUNDLED.current(INGEST_REQUEST), _ingest_request_record(request))


def decode_ingest_request(data: bytes, *, catalogue: SchemaCatalogue = BUNDLED) -> IngestRequest:
    return _validate(IngestRequest, read_single_object(data, INGEST_REQUEST, catalogue), data)


def encode_plan(plan: IngestionPlan) -> bytes:
    return write_single_object(BUNDLED.current(PLAN), _plan_record(plan))


def decode_plan(data: bytes, *, catalogue: SchemaCatalogue = BUNDLED) -> IngestionPlan:
    """Decode a plan message; does not verify its fingerprint (the applier does)."""
    return _validate(IngestionPlan, read_single_object(data, PLAN, catalogue), data)


def encode_operation(op: Operation) -> bytes:
    """Written field by field on the applier's hot path (``operation_writer``), not by fastavro."""
    return write_operation(op)


def decode_operation(data: bytes, *, catalogue: SchemaCatalogue = BUNDLED) -> Operation:
    return _validate(Operation, read_single_object(data, OPERATION, catalogue), data)


def encode_dlq_envelope(envelope: DlqEnvelope) -> bytes:
    return write_single_object(BUNDLED.current(DLQ_ENVELOPE), _dlq_envelope_record(envelope))


def decode_dlq_envelope(data: bytes, *, catalogue: SchemaCatalogue = BUNDLED) -> DlqEnvelope:
    return _validate(DlqEnvelope, read_single_object(data, DLQ_ENVELOPE, catalogue), data)


def encode_degradation_event(event: DegradationEvent) -> bytes:
    return write_single_object(BUNDLED.current(DEGRADATION_EVENT), _timestamped_record(event))


def decode_degradation_event(
    data: bytes, *, catalogue: SchemaCatalogue = BUNDLED
) -> DegradationEvent:
    return _validate(DegradationEvent, read_single_object(data, DEGRADATION_EVENT, catalogue), data)


def encode_breaker_control(control: BreakerControl) -> bytes:
    return write_single_object(BUNDLED.current(BREAKER_CONTROL), _timestamped_record(control))


def decode_breaker_control(data: bytes, *, catalogue: SchemaCatalogue = BUNDLED) -> BreakerControl:
    return _validate(BreakerControl, read_single_object(data, BREAKER_CONTROL, catalogue), data)


# --- single-object framing ----------------------------------------------------------------------


def write_single_object(schema: SchemaVersion, record: Mapping[str, Any]) -> bytes:
    """Marker, the schema's fingerprint, then ``record`` in Avro binary (fields must match exactly)."""
    buffer = io.BytesIO()
    buffer.write(MARKER)
    buffer.write(schema.fingerprint)
    try:
        schemaless_writer(buffer, schema.parsed, record, strict=True)
    except Exception as exc:  # fastavro raises ValueError, TypeError, OverflowError, ...
        raise EncodeError(f"cannot write {schema.label}: {type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()


def read_single_object(
    data: bytes, subject: str, catalogue: SchemaCatalogue = BUNDLED
) -> dict[str, Any]:
    """Read one ``subject`` record, resolved to the subject's current schema."""
    raw = bytes(data)
    if len(raw) < HEADER_SIZE or raw[: len(MARKER)] != MARKER:
        raise DecodeError(
            f"{subject} message: not Avro single-object encoded "
            f"({len(raw)} bytes, starts {raw[:2].hex() or 'empty'}, expected marker c301)",
            raw=raw,
        )
    fingerprint = raw[len(MARKER) : HEADER_SIZE]
    writer = catalogue.lookup(fingerprint)
    if writer is None:
        raise DecodeError(
            f"{subject} message: unknown writer schema fingerprint {fingerprint.hex()}", raw=raw
        )
    if writer.subject != subject:
        raise DecodeError(f"{subject} message: written with {writer.label}", raw=raw)
    reader = catalogue.current(subject)
    body = io.BytesIO(raw)
    body.seek(HEADER_SIZE)
    try:
        record = schemaless_reader(body, writer.parsed, None if reader is writer else reader.parsed)
    except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, ...
        raise DecodeError(
            f"{subject} message: body does not decode with {writer.label}: "
            f"{type(exc).__name__}: {exc}",
            raw=raw,
        ) from exc
    if body.tell() != len(raw):
        raise DecodeError(
            f"{subject} message: {len(raw) - body.tell()} bytes after the record", raw=raw
        )
    if not isinstance(record, dict):
        raise DecodeError(f"{subject} message: body is not a record", raw=raw)
    return record


def _validate(model: type[_M], record: dict[str, Any], data: bytes) -> _M:
    try:
        return model.model_validate(record)
    except (ValueError, TypeError, GraphIngestError) as exc:  # pydantic's ValidationError included
        raise DecodeError(
            f"{model.__name__} message: content fails validation: {_describe(exc)}",
            raw=bytes(data),
        ) from exc


def _describe(exc: Exception) -> str:
    """Where and why validation failed, without the input values (they may quote the document)."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    problems = exc.errors(include_url=False, include_input=False, include_context=False)
    shown = "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or '<record>'}: {problem['msg']}"
        for problem in problems[:5]
    )
    return shown if len(problems) <= 5 else f"{shown}; and {len(problems) - 5} more"


# --- domain -> record ---------------------------------------------------------------------------


def _plan_record(plan: IngestionPlan) -> dict[str, Any]:
    record = plan.model_dump(mode="python")
    mutation = record["mutation"]
    for upsert in (*mutation["node_upserts"], *mutation["edge_upserts"]):
        upsert["properties"] = _tagged_properties(upsert["properties"])
    record["created_at"] = micros(plan.created_at, "created_at")
    state = record["next_state"]
    for name in ("source_updated_at", "committed_at"):
        at = getattr(plan.next_state, name)
        state[name] = None if at is None else micros(at, f"next_state.{name}")
    return record


def _ingest_request_record(request: IngestRequest) -> dict[str, Any]:
    record = request.model_dump(mode="python")
    updated_at = request.source_updated_at
    record["source_updated_at"] = (
        None if updated_at is None else micros(updated_at, "source_updated_at")
    )
    candidates = record["candidates"]
    if candidates is not None:
        for candidate in (*candidates["entities"], *candidates["relations"]):
            candidate["properties"] = _tagged_properties(candidate["properties"])
        # Named branch: fastavro's guess does not take the (tuple) arrays for Avro arrays.
        record["candidates"] = ("io.graphingest.Extraction", candidates)
    return record


def _dlq_envelope_record(envelope: DlqEnvelope) -> dict[str, Any]:
    record = envelope.model_dump(mode="python")
    for index, (attempt, written) in enumerate(
        zip(envelope.attempts, record["attempts"], strict=True)
    ):
        written["at"] = micros(attempt.at, f"attempts[{index}].at")
    record["dead_lettered_at"] = micros(envelope.dead_lettered_at, "dead_lettered_at")
    return record


def _timestamped_record(event: DegradationEvent | BreakerControl) -> dict[str, Any]:
    """A flat record whose one datetime is ``at``."""
    record = event.model_dump(mode="python")
    record["at"] = micros(event.at, "at")
    return record


def _tagged_properties(properties: dict[str, PropertyValue]) -> dict[str, Any]:
    return {name: _tagged(name, value) for name, value in properties.items()}


def _tagged(name: str, value: PropertyValue) -> tuple[str, Any] | None:
    """The property value with its union branch named, in fastavro's tuple notation."""
    if value is None:
        return None
    if isinstance(value, list):
        return ("array", [_tagged_scalar(name, item) for item in value])
    return _tagged_scalar(name, value)


def _tagged_scalar(name: str, value: object) -> tuple[str, Any]:
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int):
        check_long(value, f"property {name}")
        return ("long", value)
    if isinstance(value, float):
        return ("double", value)
    if isinstance(value, str):
        return ("string", value)
    raise EncodeError(f"property {name}: unsupported value type {type(value).__name__}")
