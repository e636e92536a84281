"""Stand-ins for the planner's unit tests: a store view over dicts, a counting extractor, requests.

The PostgreSQL store answers the same reads in tests/integration/test_planning_store.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from graph_ingest.domain.candidates import Chunk, Extraction
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.state import DocumentState
from graph_ingest.planning.extractor import Extractor
from graph_ingest.planning.graph_schema import GraphSchema, load_graph_schema
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA

EXAMPLE_SCHEMA = BUNDLED_GRAPH_SCHEMA
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def example_schema(version: str | None = None) -> GraphSchema:
    schema = load_graph_schema(EXAMPLE_SCHEMA)
    return schema if version is None else schema.model_copy(update={"version": version})


class CountingExtractor:
    """A real extractor, counting its calls."""

    def __init__(self, inner: Extractor) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def extract(self, chunks: Sequence[Chunk], schema: GraphSchema) -> Extraction:
        self.calls += 1
        return self.inner.extract(chunks, schema)


class FakeView:
    """Committed states and registry rows in dicts; ``commit`` plays the applier's state commit."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], DocumentState] = {}
        self.registry: dict[tuple[str, str, str], str] = {}

    def commit(self, plan: IngestionPlan) -> None:
        self.states[(plan.space, plan.document_id)] = plan.next_state
        for r in plan.registrations:
            self.registry.setdefault((r.space, r.entity_type, r.normalized_name), r.node_id)

    def get_document_state(self, space: str, document_id: str) -> DocumentState | None:
        return self.states.get((space, document_id))

    def registry_lookup(
        self, space: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        return {k: self.registry[(space, *k)] for k in keys if (space, *k) in self.registry}

    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]:
        return {
            (doc, edge)
            for doc, edge in candidates
            if any(key != doc and edge in s.edge_keys for key, s in self.states.items())
        }

    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]:
        return {
            (doc, node)
            for doc, node in candidates
            if any(key != doc and node in s.node_ids for key, s in self.states.items())
        }


def request(document_id: str, content: str | None, **fields: Any) -> IngestRequest:
    values: dict[str, Any] = {
        "space": "kb",
        "document_id": document_id,
        "document_version": "1",
        "schema_version": "2026-12-01",
        "content": content,
    }
    return IngestRequest(**{**values, **fields})


def issue_count(registry: CollectorRegistry, code: str) -> float | None:
    """How many extraction issues of ``code`` the planning metrics on ``registry`` counted."""
    return registry.get_sample_value("graph_ingest_planner_extraction_issues_total", {"code": code})
