"""Document states to statement parameters, and rows back to states and committed elements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.state import DocumentState
from graph_ingest.store.documents import CommittedElements
from graph_ingest.store.postgres.params import Columns, Row, columns, json_text

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


def state_columns(states: Sequence[DocumentState]) -> dict[str, str]:
    """COMMIT_DOCUMENT_STATES / ENSURE_HISTORY parameters (``committed_at`` must be set): the
    states as one JSON array of rows (``json_to_recordset``; serialised in C, where an array per
    column costs the driver about half a microsecond per value). Each state's JSON is written as
    bytes by its pydantic serializer and spliced in whole: 24 -> 18 µs per small plan's state
    against a dump to dicts that orjson writes again. The statement reads the node ids and edge
    keys out of it."""
    return {"states": json_text([_state_row(s) for s in states])}


def _state_row(s: DocumentState) -> dict[str, Any]:
    return {
        "space": s.space,
        "document_id": s.document_id,
        "revision": s.revision,
        "operation_id": s.operation_id,
        "content_hash": s.content_hash,
        "document_version": s.document_version,
        "base_operation_id": s.base_operation_id,
        "schema_version": s.schema_version,
        "extraction_fingerprint": s.extraction_fingerprint,
        "source_updated_at": s.source_updated_at,
        "committed_at": s.committed_at,
        "state": orjson.Fragment(s.__pydantic_serializer__.to_json(s)),
    }


def fact_source_columns(states: Sequence[DocumentState]) -> Columns:
    values = [
        {
            "space": s.space,
            "document_id": s.document_id,
            "fact_id": fact.fact_id,
            "kind": fact.kind.value,
            "evidence": json_text([e.model_dump(mode="json") for e in fact.evidence]),
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
        "edge": [json_text(edge.model_dump(mode="json")) for _, edge in candidates],
    }


def claimed_node_columns(candidates: Sequence[tuple[tuple[str, str], str]]) -> Columns:
    return {
        "space": [document[0] for document, _ in candidates],
        "document_id": [document[1] for document, _ in candidates],
        "node_id": [node_id for _, node_id in candidates],
    }
