"""Operation statuses to statement parameters, and read-table rows back to statuses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from graph_ingest.domain.operation import ErrorInfo, OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import (
    OperationStatus,
    Transition,
    carried_errors,
    recorded_errors,
)
from graph_ingest.store.postgres.params import Columns, Row, columns, json_text, storable_or_none

STATUS_COLUMNS = (
    "operation_id",
    "space",
    "document_id",
    "expected_revision",
    "fingerprint",
    "stage",
    "sequence",
    "attempts",
    "error_code",
    "error_class",
    "error_message",
    "error_id",
    "trace_id",
    "retry_tier",
    "next_retry_at",
    "dlq_id",
    "parked_behind",
    "submission_id",
    "plan_kind",
    "transitions",
    "waits",
    "created_at",
    "updated_at",
)
"""The columns the operation fold writes (and the read service reads), in statement order."""

JSONB_COLUMNS = frozenset({"transitions", "waits"})
"""The columns of ``STATUS_COLUMNS`` passed as JSON text and stored as JSONB."""


def status_columns(statuses: Sequence[OperationStatus]) -> Columns:
    """Statuses as one array per column of ``STATUS_COLUMNS`` (for ``unnest``)."""
    return columns([_values(status) for status in statuses], STATUS_COLUMNS)


def _values(status: OperationStatus) -> dict[str, object]:
    error = status.last_error
    recorded = recorded_errors(status.transitions)
    return {
        "operation_id": status.operation_id,
        "space": status.space,
        "document_id": status.document_id,
        "expected_revision": status.expected_revision,
        "fingerprint": status.fingerprint,
        "stage": status.stage.value,
        "sequence": status.sequence,
        "attempts": status.attempts,
        "error_code": error.code.value if error else None,
        "error_class": storable_or_none(error.error_class) if error else None,
        "error_message": storable_or_none(error.message) if error else None,
        "error_id": error.error_id if error else None,
        "trace_id": error.trace_id if error else None,
        "retry_tier": status.retry_tier,
        "next_retry_at": status.next_retry_at,
        "dlq_id": status.dlq_id,
        "parked_behind": status.parked_behind,
        "submission_id": status.submission_id,
        "plan_kind": status.plan_kind.value if status.plan_kind else None,
        "transitions": json_text(
            [_transition_json(t, e) for t, e in zip(status.transitions, recorded, strict=True)]
        ),
        "waits": json_text([wait.model_dump(mode="json") for wait in status.waits]),
        "created_at": status.created_at,
        "updated_at": status.updated_at,
    }


def _transition_json(transition: Transition, recorded: ErrorInfo | None) -> dict[str, object]:
    """One step of the history: ``error`` is the error this step recorded (None if it recorded
    none), so each failure keeps its own step."""
    return {
        "sequence": transition.sequence,
        "stage": transition.stage.value,
        "at": transition.at.isoformat(),
        "attempts": transition.attempts,
        "error": None if recorded is None else _error_json(recorded),
    }


def _error_json(error: ErrorInfo) -> dict[str, object]:
    return {
        "code": error.code.value,
        "error_class": storable_or_none(error.error_class),
        "message": storable_or_none(error.message),
        "error_id": error.error_id,
        "trace_id": error.trace_id,
    }


def _error_of(found: Mapping[str, Any] | None) -> ErrorInfo | None:
    if found is None:
        return None
    return ErrorInfo(
        code=StatusCode(found["code"]),
        error_class=found["error_class"] or "",
        message=found["message"] or "",
        error_id=found.get("error_id"),
        trace_id=found.get("trace_id"),
    )


def status_from_row(row: Row) -> OperationStatus:
    error = None
    if row["error_code"] is not None:
        error = ErrorInfo(
            code=StatusCode(row["error_code"]),
            error_class=row["error_class"] or "",
            message=row["error_message"] or "",
            error_id=row["error_id"],
            trace_id=row["trace_id"],
        )
    steps = row["transitions"]
    carried = carried_errors(_error_of(t.get("error")) for t in steps)
    return OperationStatus(
        operation_id=row["operation_id"],
        space=row["space"],
        document_id=row["document_id"],
        expected_revision=row["expected_revision"],
        fingerprint=row["fingerprint"],
        stage=Stage(row["stage"]),
        sequence=row["sequence"],
        attempts=row["attempts"],
        last_error=error,
        next_retry_at=row["next_retry_at"],
        dlq_id=row["dlq_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        transitions=tuple(
            Transition(
                sequence=int(t["sequence"]),
                stage=Stage(t["stage"]),
                at=datetime.fromisoformat(t["at"]),
                attempts=int(t["attempts"]),
                last_error=last_error,
            )
            for t, last_error in zip(steps, carried, strict=True)
        ),
        plan_kind=PlanKind(row["plan_kind"]) if row["plan_kind"] else None,
        submission_id=row["submission_id"],
        retry_tier=row["retry_tier"],
        parked_behind=row["parked_behind"],
        waits=tuple(OutageWait.model_validate(wait) for wait in row["waits"]),
    )


__all__ = ["JSONB_COLUMNS", "STATUS_COLUMNS", "status_columns", "status_from_row"]
