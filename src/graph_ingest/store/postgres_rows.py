"""Domain values to statement parameters (parallel arrays) and rows back to domain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

import orjson

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.error_detail import ErrorDetail
from graph_ingest.domain.limits import storable_text
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState, EntityRegistration
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.store.base import (
    ON_ITS_WAY,
    CommittedElements,
    DlqCount,
    DlqEntry,
    DlqQuery,
    FailureAttempt,
    NewOperation,
    PlanClaim,
    RecoveryClaim,
    Replan,
    ReplanOutcome,
    Submission,
    SubmissionIssue,
)
from graph_ingest.store.registry_rules import RegistryRow

Row = Mapping[str, Any]
Columns = dict[str, list[Any]]


# Columns of document_states that map one to one onto DocumentState fields.
_STATE_FIELDS = (
    "space",
    "document_id",
    "revision",
    "operation_id",
    "content_hash",
    "document_version",
    "node_ids",
    "edge_keys",
    "superseded_edge_keys",
    "kept_edge_keys",
    "base_operation_id",
    "schema_version",
    "extraction_fingerprint",
    "source_updated_at",
)


def key_columns(names: Sequence[str], keys: Sequence[tuple[Any, ...]]) -> Columns:
    """Key tuples as one array parameter per column (for ``unnest``), named ``names`` in order."""
    return {name: [key[index] for key in keys] for index, name in enumerate(names)}


def _json(value: Any) -> str:
    """Compact JSON text for a JSONB parameter (orjson: about 20 of these per plan)."""
    return orjson.dumps(value).decode("utf-8")


def _storable(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


def columns(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Columns:
    """Transpose rows into one list per column: the arrays ``unnest`` turns back into rows."""
    return {name: [row[name] for row in rows] for name in names}


# -- operations ----------------------------------------------------------------------------------

_SNAPSHOT_FIELDS = (
    "operation_id",
    "stage",
    "sequence",
    "attempts",
    "last_error_code",
    "last_error_class",
    "last_error_message",
    "stage_times",
    "next_retry_at",
    "dlq_id",
    "updated_at",
)
_IDENTITY_FIELDS = ("space", "document_id", "expected_revision", "fingerprint", "created_at")


def snapshot_values(op: Operation) -> dict[str, Any]:
    """The mutable part of an operation, as column values."""
    error = op.last_error
    return {
        "operation_id": op.operation_id,
        "stage": op.stage.value,
        "sequence": op.sequence,
        "attempts": op.attempts,
        "last_error_code": error.code.value if error else None,
        "last_error_class": _storable(error.error_class) if error else None,
        "last_error_message": _storable(error.message) if error else None,
        "stage_times": _json({stage.value: at.isoformat() for stage, at in op.stage_times.items()}),
        "next_retry_at": op.next_retry_at,
        "dlq_id": op.dlq_id,
        "updated_at": op.updated_at,
    }


def event_headers(op: Operation) -> str:
    return _json(
        {"operation_id": op.operation_id, "sequence": str(op.sequence), "stage": op.stage.value}
    )


def new_operation_columns(
    rows: Sequence[tuple[NewOperation, bytes]],
) -> Columns:
    """(new operation, encoded PREPARED event) -> INSERT_OPERATIONS parameters."""
    values = [
        {
            **snapshot_values(new.operation),
            **{name: getattr(new.operation, name) for name in _IDENTITY_FIELDS},
            "plan_bytes": new.plan_bytes,
            "message_key": new.operation.operation_id.encode(),
            "message_value": event,
            "headers": event_headers(new.operation),
            "work_headers": _json(dict(new.work_headers)),
            **_first_delivery(new.first_delivery),
        }
        for new, event in rows
    ]
    names = (
        *_SNAPSHOT_FIELDS,
        *_IDENTITY_FIELDS,
        "plan_bytes",
        "message_key",
        "message_value",
        "headers",
        "work_headers",
        "first_topic",
        "first_partition",
        "first_offset",
    )
    return columns(values, names)


def _first_delivery(position: tuple[str, int, int] | None) -> dict[str, object]:
    topic, partition, offset = position if position is not None else (None, None, None)
    return {"first_topic": topic, "first_partition": partition, "first_offset": offset}


def saved_operation_columns(latest: Sequence[tuple[Operation, int]]) -> Columns:
    """(latest snapshot, sequence it must replace) -> the snapshot arrays of SAVE_OPERATIONS."""
    values = [{**snapshot_values(op), "expected_sequence": expected} for op, expected in latest]
    return columns(values, (*_SNAPSHOT_FIELDS, "expected_sequence"))


def event_columns(events: Sequence[tuple[Operation, bytes]]) -> Columns:
    """(snapshot, encoded event) -> the event arrays of SAVE_OPERATIONS."""
    return {
        "event_operation_id": [op.operation_id for op, _ in events],
        "event_sequence": [op.sequence for op, _ in events],
        "event_key": [op.operation_id.encode() for op, _ in events],
        "event_value": [value for _, value in events],
        "event_headers": [event_headers(op) for op, _ in events],
    }


def operation_from_row(row: Row) -> Operation:
    error = None
    if row["last_error_code"] is not None:
        error = ErrorInfo(
            code=StatusCode(row["last_error_code"]),
            error_class=row["last_error_class"] or "",
            message=row["last_error_message"] or "",
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
        }
    )


def recovery_claim_from_row(row: Row) -> RecoveryClaim:
    """An operation row with ``plan_bytes`` and its ``recovery_*`` columns."""
    return RecoveryClaim(
        operation=operation_from_row(row),
        plan_bytes=bytes(row["plan_bytes"]),
        work_headers=dict(row["work_headers"]),
        claimed_by=row["recovery_claimed_by"],
        lease_until=row["recovery_lease_until"],
        claims=row["recovery_claims"],
    )


# -- documents -----------------------------------------------------------------------------------


def _edge_keys(keys: Sequence[EdgeKey]) -> str:
    return _json([key.model_dump(mode="json") for key in keys])


def state_columns(states: Sequence[DocumentState]) -> Columns:
    """COMMIT_DOCUMENT_STATES / ENSURE_HISTORY parameters (``committed_at`` must be set)."""
    values = [
        {
            "space": s.space,
            "document_id": s.document_id,
            "revision": s.revision,
            "operation_id": s.operation_id,
            "content_hash": s.content_hash,
            "document_version": s.document_version,
            "node_ids": _json(list(s.node_ids)),
            "edge_keys": _edge_keys(s.edge_keys),
            "superseded_edge_keys": _edge_keys(s.superseded_edge_keys),
            "kept_edge_keys": _edge_keys(s.kept_edge_keys),
            "base_operation_id": s.base_operation_id,
            "schema_version": s.schema_version,
            "extraction_fingerprint": s.extraction_fingerprint,
            "source_updated_at": s.source_updated_at,
            "committed_at": s.committed_at,
            "state": _json(s.model_dump(mode="json")),
        }
        for s in states
    ]
    return columns(values, (*_STATE_FIELDS, "committed_at", "state"))


def fact_source_columns(states: Sequence[DocumentState]) -> Columns:
    values = [
        {
            "space": s.space,
            "document_id": s.document_id,
            "fact_id": fact.fact_id,
            "kind": fact.kind.value,
            "evidence": _json([e.model_dump(mode="json") for e in fact.evidence]),
            "operation_id": s.operation_id,
            "ordinal": ordinal,
        }
        for s in states
        for ordinal, fact in enumerate(s.fact_sources)
    ]
    names = ("space", "document_id", "fact_id", "kind", "evidence", "operation_id", "ordinal")
    return columns(values, names)


def state_from_row(row: Row) -> DocumentState:
    """A ``document_states`` row joined with its fact sources (as a JSON array)."""
    return DocumentState.model_validate(
        {name: row[name] for name in (*_STATE_FIELDS, "fact_sources", "committed_at")}
    )


def committed_elements_from_row(row: Row) -> CommittedElements:
    return CommittedElements(
        space=row["space"],
        document_id=row["document_id"],
        revision=row["revision"],
        operation_id=row["operation_id"],
        node_ids=tuple(row["node_ids"]),
        edge_keys=tuple(EdgeKey.model_validate(k) for k in row["edge_keys"]),
        superseded_edge_keys=tuple(EdgeKey.model_validate(k) for k in row["superseded_edge_keys"]),
        kept_edge_keys=tuple(EdgeKey.model_validate(k) for k in row["kept_edge_keys"]),
    )


def claimed_edge_columns(candidates: Sequence[tuple[tuple[str, str], EdgeKey]]) -> Columns:
    return {
        "space": [document[0] for document, _ in candidates],
        "document_id": [document[1] for document, _ in candidates],
        "edge": [_json(edge.model_dump(mode="json")) for _, edge in candidates],
    }


def claimed_node_columns(candidates: Sequence[tuple[tuple[str, str], str]]) -> Columns:
    return {
        "space": [document[0] for document, _ in candidates],
        "document_id": [document[1] for document, _ in candidates],
        "node_id": [node_id for _, node_id in candidates],
    }


# -- registry, outbox, failures, DLQ ------------------------------------------------------------------


def registration_columns(registrations: Sequence[EntityRegistration]) -> Columns:
    return {
        "space": [r.space for r in registrations],
        "entity_type": [r.entity_type for r in registrations],
        "normalized_name": [r.normalized_name for r in registrations],
        "name": [r.name for r in registrations],
        "node_id": [r.node_id for r in registrations],
        "aliases": [_json(list(r.aliases)) for r in registrations],
    }


def registry_row(row: Row) -> RegistryRow:
    return RegistryRow(
        space=row["space"],
        entity_type=row["entity_type"],
        normalized_name=row["normalized_name"],
        name=row["name"],
        node_id=row["node_id"],
        aliases=tuple(row["aliases"]),
    )


def outbox_columns(messages: Sequence[OutboxMessage]) -> Columns:
    return {
        "topic": [m.topic for m in messages],
        "message_key": [m.key for m in messages],
        "message_value": [m.value for m in messages],
        "headers": [_json(m.headers) for m in messages],
        "operation_id": [m.operation_id for m in messages],
        "sequence": [m.sequence for m in messages],
    }


def failure_params(attempt: FailureAttempt) -> dict[str, Any]:
    topic, partition, offset = attempt.source or (None, None, None)
    return {
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
        "operation_id": attempt.operation_id,
        "attempt": attempt.attempt,
        "tier": attempt.tier,
        "routed_to": attempt.routed_to,
        "at": attempt.at,
        "detail": attempt.detail.model_dump_json(),
    }


def failure_from_row(row: Row) -> FailureAttempt:
    topic = row["source_topic"]
    return FailureAttempt(
        source=None if topic is None else (topic, row["source_partition"], row["source_offset"]),
        operation_id=row["operation_id"],
        attempt=row["attempt"],
        tier=row["tier"],
        routed_to=row["routed_to"],
        at=row["at"],
        detail=ErrorDetail.model_validate(row["detail"]),
    )


_DLQ_ENTRY_FIELDS = tuple(f.name for f in fields(DlqEntry))


def dlq_entry_columns(entries: Sequence[DlqEntry]) -> Columns:
    values = [
        {
            **{name: getattr(e, name) for name in _DLQ_ENTRY_FIELDS},
            "status": e.status.value,
            "code": e.code.value,
        }
        for e in entries
    ]
    return columns(values, _DLQ_ENTRY_FIELDS)


def dlq_entry_from_row(row: Row) -> DlqEntry:
    values = {name: row[name] for name in _DLQ_ENTRY_FIELDS}
    return DlqEntry(
        **{
            **values,
            "status": DlqStatus(row["status"]),
            "code": StatusCode(row["code"]),
            "envelope": bytes(row["envelope"]),
        }
    )


def dlq_query_params(query: DlqQuery) -> dict[str, Any]:
    after_at, after_id = query.after or (None, None)
    return {
        "status": None if query.status is None else query.status.value,
        "code": None if query.code is None else query.code.value,
        "space": query.space,
        "document_id": query.document_id,
        "older_than_s": None if query.older_than_s is None else float(query.older_than_s),
        "limit": query.limit,
        "after_at": after_at,
        "after_id": after_id,
    }


def dlq_count_from_row(row: Row) -> DlqCount:
    return DlqCount(
        code=StatusCode(row["code"]),
        status=DlqStatus(row["status"]),
        entries=row["entries"],
        oldest_age_s=max(float(row["oldest_age_s"]), 0.0),
    )


# -- the planner -----------------------------------------------------------------------------------

_SUBMISSION_FIELDS = ("submission_id", "space", "document_id", "operation_id", "dlq_id", "trace_id")


def submission_columns(submissions: Sequence[Submission]) -> Columns:
    values = [
        {
            **{name: getattr(s, name) for name in _SUBMISSION_FIELDS},
            "source_topic": s.source[0],
            "source_partition": s.source[1],
            "source_offset": s.source[2],
            "planned_at": s.planned_at,
            "issues": _json([asdict(issue) for issue in s.issues]),
            "issue_count": s.issue_count,
        }
        for s in submissions
    ]
    return columns(
        values,
        (
            *_SUBMISSION_FIELDS,
            "source_topic",
            "source_partition",
            "source_offset",
            "planned_at",
            "issues",
            "issue_count",
        ),
    )


def submission_from_row(row: Row) -> Submission:
    return Submission(
        **{name: row[name] for name in _SUBMISSION_FIELDS},
        source=(row["source_topic"], row["source_partition"], row["source_offset"]),
        planned_at=row["planned_at"],
        issues=tuple(SubmissionIssue(**issue) for issue in row["issues"]),
        issue_count=row["issue_count"],
    )


_REPLAN_FIELDS = ("operation_id", "submission_id", "attempt", "replanned_as", "dlq_id", "at")


def replan_columns(replans: Sequence[Replan]) -> Columns:
    values = [
        {**{name: getattr(r, name) for name in _REPLAN_FIELDS}, "outcome": r.outcome.value}
        for r in replans
    ]
    return columns(values, (*_REPLAN_FIELDS, "outcome"))


def replan_from_row(row: Row) -> Replan:
    return Replan(
        **{name: row[name] for name in _REPLAN_FIELDS}, outcome=ReplanOutcome(row["outcome"])
    )


def plan_claim_columns(claims: Sequence[PlanClaim]) -> Columns:
    return {
        "operation_id": [c.operation_id for c in claims],
        "fingerprint": [c.fingerprint for c in claims],
        "plan_bytes": [c.plan_bytes for c in claims],
    }


def on_its_way_params() -> dict[str, Any]:
    """The parameters of ``postgres_sql._nothing_on_its_way``."""
    return {
        "on_its_way": sorted(stage.value for stage in ON_ITS_WAY),
        "dead_lettered": Stage.DEAD_LETTERED.value,
        "resolved": DlqStatus.RESOLVED.value,
    }
