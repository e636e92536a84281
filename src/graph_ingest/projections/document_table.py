"""The per-document read table (``<schema>_read.documents``): a batch of operation events folded
into it with its positions, in one transaction.

An operation's events share a partition, but a document's operations need not (the operations
topic is keyed by operation id), so two projectors may fold one document at once: the batch
locks its documents (a transaction-scoped advisory lock each, in a stable order), reads their
views, folds (``projections.document_fold``: pure) and writes the changed views.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.kafka.records import Position
from graph_ingest.projections.document_fold import DocumentOperation, DocumentView, fold_document
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.fold import FoldVerdict
from graph_ingest.projections.tables import SKIPPED, ReadTables
from graph_ingest.store.postgres.params import Row, columns, json_text

DOCUMENTS = "documents"
"""The per-document projection of the operations topic (its table, and its name in
``tracking_positions``)."""

DOCUMENT_COLUMNS = (
    "space",
    "document_id",
    "revision",
    "operation_id",
    "completed_at",
    "operations",
    "updated_at",
)

_LOCK = """
SELECT pg_advisory_xact_lock(hashtext({name}), hashtext(space || '/' || document_id))
FROM unnest(%(space)s::text[], %(document_id)s::text[]) AS d(space, document_id)
"""
_SELECT = """
SELECT {columns} FROM {table}
WHERE (space, document_id) IN (
    SELECT * FROM unnest(%(space)s::text[], %(document_id)s::text[]))
"""
_UPSERT = """
INSERT INTO {table} ({columns})
SELECT space, document_id, revision, operation_id, completed_at, operations::jsonb, updated_at
FROM unnest(%(space)s::text[], %(document_id)s::text[], %(revision)s::bigint[],
            %(operation_id)s::text[], %(completed_at)s::timestamptz[], %(operations)s::text[],
            %(updated_at)s::timestamptz[]) AS d({columns})
ON CONFLICT (space, document_id) DO UPDATE SET
    revision = excluded.revision, operation_id = excluded.operation_id,
    completed_at = excluded.completed_at, operations = excluded.operations,
    updated_at = excluded.updated_at
"""


def document_statements(schema: str) -> dict[str, sql.Composed]:
    table = sql.Identifier(schema, DOCUMENTS)
    names = sql.SQL(", ").join(sql.Identifier(c) for c in DOCUMENT_COLUMNS)
    return {
        "lock": sql.SQL(_LOCK).format(name=sql.Literal(f"{schema}.{DOCUMENTS}")),
        "select": sql.SQL(_SELECT).format(columns=names, table=table),
        "upsert": sql.SQL(_UPSERT).format(columns=names, table=table),
    }


def fold_documents(tables: ReadTables, events: Sequence[OperationEvent]) -> dict[Position, str]:
    """Fold ``events`` into the documents table and record their positions, in one
    transaction; the outcome of each event by position (a verdict, or SKIPPED)."""
    by_document: dict[tuple[str, str], list[OperationEvent]] = defaultdict(list)
    outcomes: dict[Position, str] = {}
    for event in events:
        if event.operation is None:
            outcomes[(event.topic, event.partition, event.offset)] = SKIPPED
        else:
            by_document[(event.operation.space, event.operation.document_id)].append(event)
    keys = sorted(by_document)  # one lock order for every projector: no deadlock
    statements = document_statements(tables.schema)
    with tables.transaction() as cur:
        if keys:
            params = {"space": [s for s, _ in keys], "document_id": [d for _, d in keys]}
            cur.execute(statements["lock"], params)
            stored = {
                (row["space"], row["document_id"]): view_from_row(row)
                for row in cur.execute(statements["select"], params).fetchall()
            }
            changed = _folded(stored, by_document, outcomes)
            if changed:
                cur.execute(statements["upsert"], columns(changed, DOCUMENT_COLUMNS))
        tables.record_positions(cur, DOCUMENTS, events)
    return outcomes


def _folded(
    stored: dict[tuple[str, str], DocumentView],
    by_document: dict[tuple[str, str], list[OperationEvent]],
    outcomes: dict[Position, str],
) -> list[dict[str, Any]]:
    """Fold each document's events onto its stored view; the changed views, as row values."""
    changed = []
    for key, events in by_document.items():
        view = stored.get(key)
        moved = False
        for event in events:
            assert event.operation is not None  # grouped above
            verdict, view = fold_document(view, event.operation)
            outcomes[(event.topic, event.partition, event.offset)] = verdict.value
            moved = moved or verdict is not FoldVerdict.DUPLICATE
        if moved and view is not None:
            changed.append(_values(view))
    return changed


def _values(view: DocumentView) -> dict[str, Any]:
    return {
        "space": view.space,
        "document_id": view.document_id,
        "revision": view.revision,
        "operation_id": view.operation_id,
        "completed_at": view.completed_at,
        "operations": json_text([_operation_json(o) for o in view.operations]),
        "updated_at": view.updated_at,
    }


def _operation_json(operation: DocumentOperation) -> dict[str, object]:
    return {
        "operation_id": operation.operation_id,
        "expected_revision": operation.expected_revision,
        "stage": operation.stage.value,
        "sequence": operation.sequence,
        "plan_kind": operation.plan_kind.value if operation.plan_kind else None,
        "document_version": operation.document_version,
        "created_at": operation.created_at.isoformat(),
        "updated_at": operation.updated_at.isoformat(),
    }


def view_from_row(row: Row) -> DocumentView:
    operations = tuple(
        DocumentOperation(
            operation_id=o["operation_id"],
            expected_revision=int(o["expected_revision"]),
            stage=Stage(o["stage"]),
            sequence=int(o["sequence"]),
            plan_kind=PlanKind(o["plan_kind"]) if o["plan_kind"] else None,
            # absent from the rows a projector folded before operations carried the version
            document_version=o.get("document_version"),
            created_at=datetime.fromisoformat(o["created_at"]),
            updated_at=datetime.fromisoformat(o["updated_at"]),
        )
        for o in row["operations"]
    )
    # the version is no column: the operation that made the revision made it
    made = next((o for o in operations if o.operation_id == row["operation_id"]), None)
    return DocumentView(
        space=row["space"],
        document_id=row["document_id"],
        revision=row["revision"],
        document_version=made.document_version if made else None,
        operation_id=row["operation_id"],
        completed_at=row["completed_at"],
        operations=operations,
        updated_at=row["updated_at"],
    )


__all__ = [
    "DOCUMENTS",
    "DOCUMENT_COLUMNS",
    "document_statements",
    "fold_documents",
    "view_from_row",
]
