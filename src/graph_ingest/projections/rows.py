"""Operation statuses to statement parameters, and read-table rows back to statuses."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus, Transition
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
    "next_retry_at",
    "dlq_id",
    "transitions",
    "created_at",
    "updated_at",
)
"""The columns the operation fold writes (and the read service reads), in statement order."""


def status_columns(statuses: Sequence[OperationStatus]) -> Columns:
    """Statuses as one array per column of ``STATUS_COLUMNS`` (for ``unnest``)."""
    return columns([_values(status) for status in statuses], STATUS_COLUMNS)


def _values(status: OperationStatus) -> dict[str, object]:
    error = status.last_error
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
        "next_retry_at": status.next_retry_at,
        "dlq_id": status.dlq_id,
        "transitions": json_text([_transition_json(t) for t in status.transitions]),
        "created_at": status.created_at,
        "updated_at": status.updated_at,
    }


def _transition_json(transition: Transition) -> dict[str, object]:
    return {
        "sequence": transition.sequence,
        "stage": transition.stage.value,
        "at": transition.at.isoformat(),
        "attempts": transition.attempts,
    }


def status_from_row(row: Row) -> OperationStatus:
    error = None
    if row["error_code"] is not None:
        error = ErrorInfo(
            code=StatusCode(row["error_code"]),
            error_class=row["error_class"] or "",
            message=row["error_message"] or "",
        )
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
            )
            for t in row["transitions"]
        ),
    )


__all__ = ["STATUS_COLUMNS", "status_columns", "status_from_row"]
