"""Operations to statement parameters, and operation rows back to ``Operation``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.operations import NewOperation
from graph_ingest.store.postgres.params import Row, json_text, storable_or_none

_IDENTITY_FIELDS = ("space", "document_id", "expected_revision", "fingerprint", "created_at")


def snapshot_values(op: Operation) -> dict[str, Any]:
    """The mutable part of an operation, as column values; its JSON columns as Python values
    (the statements take their rows as JSON, written by orjson: datetimes included)."""
    error = op.last_error
    return {
        "operation_id": op.operation_id,
        "stage": op.stage.value,
        "sequence": op.sequence,
        "attempts": op.attempts,
        "last_error_code": error.code.value if error else None,
        "last_error_class": storable_or_none(error.error_class) if error else None,
        "last_error_message": storable_or_none(error.message) if error else None,
        "stage_times": {stage.value: at for stage, at in op.stage_times.items()},
        "next_retry_at": op.next_retry_at,
        "dlq_id": op.dlq_id,
        "updated_at": op.updated_at,
        "details": _details(op),
    }


_OPTIONAL_DETAILS = (
    "plan_kind",
    "submission_id",
    "document_version",
    "retry_tier",
    "parked_behind",
)
_DETAILS = (*_OPTIONAL_DETAILS, "waits")
"""The fields operation.v2 added, kept in one JSONB column (migration 0009)."""


def _details(op: Operation) -> dict[str, Any]:
    """What operation.v2 added, as JSON: only what is set (most operations set little). Read
    from the attributes: ``model_dump`` took a quarter of an operation's row, on every stage."""
    details: dict[str, Any] = {
        name: value for name in _OPTIONAL_DETAILS if (value := getattr(op, name)) is not None
    }
    if op.waits:
        details["waits"] = [wait.model_dump() for wait in op.waits]
    error = op.last_error
    if error is not None:
        details.update(
            (name, value)
            for name, value in (("error_id", error.error_id), ("trace_id", error.trace_id))
            if value is not None
        )
    return details


def new_operation_columns(rows: Sequence[tuple[NewOperation, bytes]]) -> dict[str, Any]:
    """(new operation, encoded PREPARED event) -> INSERT_OPERATIONS parameters: the rows as JSON
    (serialised in C; an array per column costs the driver about half a microsecond per value),
    the plans' and events' bytes as two arrays."""
    return {
        "operations": json_text(
            [
                {
                    **snapshot_values(new.operation),
                    **{name: getattr(new.operation, name) for name in _IDENTITY_FIELDS},
                    "work_headers": dict(new.work_headers),
                    **_first_delivery(new.first_delivery),
                }
                for new, _ in rows
            ]
        ),
        "plan_bytes": [new.plan_bytes for new, _ in rows],
        "message_value": [event for _, event in rows],
    }


def _first_delivery(position: tuple[str, int, int] | None) -> dict[str, object]:
    topic, partition, offset = position if position is not None else (None, None, None)
    return {"first_topic": topic, "first_partition": partition, "first_offset": offset}


def saved_operation_columns(
    latest: Sequence[tuple[Operation, int]], events: Sequence[tuple[Operation, bytes]]
) -> dict[str, Any]:
    """(latest snapshot, sequence it must replace) and (snapshot, encoded event) -> the
    parameters of SAVE_OPERATIONS: the rows as JSON (serialised in C; an array per column costs
    the driver about half a microsecond per value), the events' bytes as one array."""
    return {
        "snapshots": json_text(
            [{**snapshot_values(op), "expected_sequence": expected} for op, expected in latest]
        ),
        "events": json_text(
            [
                {"operation_id": op.operation_id, "sequence": op.sequence, "stage": op.stage.value}
                for op, _ in events
            ]
        ),
        "event_value": [value for _, value in events],
    }


def operation_from_row(row: Row) -> Operation:
    details = dict(row["details"] or {})
    error = None
    if row["last_error_code"] is not None:
        error = ErrorInfo(
            code=StatusCode(row["last_error_code"]),
            error_class=row["last_error_class"] or "",
            message=row["last_error_message"] or "",
            error_id=details.get("error_id"),
            trace_id=details.get("trace_id"),
        )
    return Operation.model_validate(
        {
            "operation_id": row["operation_id"],
            "space": row["space"],
            "document_id": row["document_id"],
            "expected_revision": row["expected_revision"],
            "fingerprint": row["fingerprint"],
            "stage": row["stage"],
            "sequence": row["sequence"],
            "attempts": row["attempts"],
            "last_error": error,
            "stage_times": row["stage_times"],
            "next_retry_at": row["next_retry_at"],
            "dlq_id": row["dlq_id"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            **{name: details[name] for name in _DETAILS if name in details},
        }
    )
