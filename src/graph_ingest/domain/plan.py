"""The frozen ingestion plan: the unit of work every retry, replay and resume re-applies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from operator import attrgetter
from typing import Any

from pydantic import Field, model_validator

from graph_ingest.domain.errors import FingerprintMismatch
from graph_ingest.domain.fingerprint import (
    NeedsReference,
    fingerprint_of,
    fingerprint_of_typed,
    json_ready,
)
from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.ids import document_key
from graph_ingest.domain.limits import MAX_REVISION, StoredId, StoredText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.mutation import EdgeIdentity, EdgeKey, Mutation, PropertyValue
from graph_ingest.domain.state import DocumentState, EntityRegistration


class PlanKind(StrEnum):
    INGESTION = "INGESTION"
    RETRACTION = "RETRACTION"
    NO_OP = "NO_OP"


class GraphOptions(FrozenModel):
    """Routing in the graph: which database, and the base label every node of the plan carries."""

    database: Identifier = "neo4j"
    node_label: Identifier = "Entity"


class Provenance(FrozenModel):
    """Who planned it. Not part of the fingerprint: re-planning elsewhere may not change identity."""

    extractor: str = "unknown"
    model: str | None = None
    prompt_version: str | None = None


class IngestionPlan(FrozenModel):
    kind: PlanKind
    space: Identifier
    document_id: StoredId
    document_version: StoredText
    operation_id: StoredId
    expected_revision: int = Field(ge=0, le=MAX_REVISION - 1)
    base_operation_id: StoredId | None = None
    """The operation whose committed state the plan was planned on (DESIGN.md §7a): the plan
    applies only onto exactly that state. None only for a new document (expected revision 0)."""
    graph: GraphOptions = GraphOptions()
    mutation: Mutation = Mutation()
    next_state: DocumentState
    registrations: tuple[EntityRegistration, ...] = ()
    provenance: Provenance = Provenance()
    created_at: datetime
    fingerprint: StoredText

    @model_validator(mode="after")
    def check_consistency(self) -> IngestionPlan:
        state = self.next_state
        problems = []
        if (state.space, state.document_id) != (self.space, self.document_id):
            problems.append("next_state names another document")
        if (self.base_operation_id is None) != (self.expected_revision == 0):
            problems.append(
                "base_operation_id must name the operation of the state the plan was planned on "
                "when expected_revision > 0, and be absent when it is 0"
            )
        if self.kind is PlanKind.NO_OP:
            # A NO_OP changes nothing: its next state is the state it was planned on.
            if (state.revision, state.operation_id) != (
                self.expected_revision,
                self.base_operation_id,
            ):
                problems.append(
                    "a NO_OP plan's next_state must be its base state "
                    "(revision = expected_revision, operation_id = base_operation_id)"
                )
        else:
            if state.revision != self.expected_revision + 1:
                problems.append(
                    f"next_state.revision {state.revision} != expected_revision + 1 "
                    f"({self.expected_revision + 1})"
                )
            if state.operation_id != self.operation_id:
                problems.append("next_state.operation_id differs from operation_id")
            if state.base_operation_id != self.base_operation_id:
                problems.append("next_state.base_operation_id differs from base_operation_id")
        if any(r.space != self.space for r in self.registrations):
            problems.append("a registration names another space")
        if self.kind is PlanKind.NO_OP and not self.mutation.is_empty:
            problems.append("a NO_OP plan must not mutate the graph")
        if problems:
            raise ValueError("inconsistent plan: " + "; ".join(problems))
        return self

    @property
    def key(self) -> str:
        """The Kafka key of the plan's messages (``ids.document_key``)."""
        return document_key(self.space, self.document_id)

    @property
    def changes_state(self) -> bool:
        """Whether committing the plan moves the document to a new revision (a NO_OP does not)."""
        return self.kind is not PlanKind.NO_OP

    def business_content(self) -> dict[str, Any]:
        return business_content_of(self)

    def computed_fingerprint(self) -> str:
        # Only property values can hold what orjson writes otherwise than RFC 8785 (floats); the
        # model types every other leaf, so only they are walked (fingerprint_of_typed).
        try:
            return fingerprint_of_typed(business_content_of(self, _typed_properties))
        except NeedsReference:
            return fingerprint_of(self.business_content())

    def verify_fingerprint(self) -> None:
        actual = self.computed_fingerprint()
        if actual != self.fingerprint:
            raise FingerprintMismatch(
                f"plan {self.operation_id}: carried fingerprint {self.fingerprint} "
                f"!= recomputed {actual}"
            )

    @classmethod
    def freeze(cls, **fields: Any) -> IngestionPlan:
        """Build a plan from its fields and seal it with its fingerprint."""
        fields.setdefault("created_at", datetime.now(UTC))
        draft = cls.model_validate({**fields, "fingerprint": "unsealed"})
        return draft.model_copy(update={"fingerprint": draft.computed_fingerprint()})


# Sort keys read in C: the content's sets are sorted on every consumed plan.
_EDGE_ORDER = attrgetter("src", "type", "dst", "rank")
_NODE_ORDER = attrgetter("node_id")
_REGISTRATION_ORDER = attrgetter("entity_type", "normalized_name", "node_id")
_PLAIN = frozenset({str, int, bool, type(None)})


def _edge(edge: EdgeIdentity) -> list[Any]:
    return [edge.src, edge.type, edge.dst, edge.rank]


def _edges(keys: tuple[EdgeKey, ...]) -> list[list[Any]]:
    return [_edge(k) for k in sorted(keys, key=_EDGE_ORDER)]


def _typed_properties(properties: Mapping[str, PropertyValue]) -> Any:
    """``json_ready`` of a validated property map, which walks it only if it holds a value orjson
    may not write as RFC 8785 does (a float, a list, anything but str, int, bool and None): the
    names are identifiers (ASCII), and an int out of range is caught by ``fingerprint_of_typed``."""
    if _PLAIN.issuperset(map(type, properties.values())):
        return properties
    return json_ready(properties)


def _planned_with(state: DocumentState) -> dict[str, str]:
    """The schema version and extraction fingerprint, where the state has them: a plan frozen
    before states carried them keeps its fingerprint."""
    present = {
        "schema_version": state.schema_version,
        "extraction_fingerprint": state.extraction_fingerprint,
    }
    return {name: value for name, value in present.items() if value is not None}


def _based_on(plan: IngestionPlan) -> dict[str, str]:
    """The base operation, where the plan has one: a new document's plan keeps the fingerprint
    it had before plans named their base."""
    base = plan.base_operation_id
    return {} if base is None else {"base_operation_id": base}


def _as_is(properties: Mapping[str, PropertyValue]) -> Any:
    return properties


def business_content_of(
    plan: IngestionPlan, properties: Callable[[Mapping[str, PropertyValue]], Any] = _as_is
) -> dict[str, Any]:
    """Everything that decides what the plan does, with sets sorted; no timestamps (commit time,
    source update time), no provenance. ``properties`` turns each property map into what the
    content holds (they are its only float-capable leaves)."""
    return {
        "kind": plan.kind.value,
        "space": plan.space,
        "document_id": plan.document_id,
        "document_version": plan.document_version,
        "expected_revision": plan.expected_revision,
        **_based_on(plan),
        "graph": plan.graph.model_dump(mode="json"),
        "mutation": _mutation_content(plan.mutation, properties),
        "next_state": _state_content(plan.next_state),
        "registrations": [
            {
                "entity_type": r.entity_type,
                "name": r.name,
                "normalized_name": r.normalized_name,
                "node_id": r.node_id,
                "aliases": sorted(set(r.aliases)) if r.aliases else [],
            }
            for r in sorted(plan.registrations, key=_REGISTRATION_ORDER)
        ],
    }


def _mutation_content(
    m: Mutation, properties: Callable[[Mapping[str, PropertyValue]], Any]
) -> dict[str, Any]:
    """The mutation's part of the business content: upserts and deletes sorted by identity."""
    return {
        "node_upserts": [
            {
                "node_id": n.node_id,
                "labels": sorted(set(n.labels)) if n.labels else [],
                "properties": properties(n.properties),
            }
            for n in sorted(m.node_upserts, key=_NODE_ORDER)
        ],
        "edge_upserts": [
            {"edge": _edge(e), "properties": properties(e.properties)}
            for e in sorted(m.edge_upserts, key=_EDGE_ORDER)
        ],
        "node_deletes": sorted(m.node_deletes),
        "edge_deletes": _edges(m.edge_deletes),
        "detach_deleted_nodes": m.detach_deleted_nodes,
        **({"deletes_if_unreferenced": True} if m.deletes_if_unreferenced else {}),
    }


def _state_content(s: DocumentState) -> dict[str, Any]:
    """The next state's part: no commit or source update time, lists sorted."""
    return {
        "revision": s.revision,
        "content_hash": s.content_hash,
        "document_version": s.document_version,
        **_planned_with(s),
        "node_ids": sorted(set(s.node_ids)),
        "edge_keys": _edges(s.edge_keys),
        "superseded_edge_keys": _edges(s.superseded_edge_keys),
        **({"kept_edge_keys": _edges(s.kept_edge_keys)} if s.kept_edge_keys else {}),
        "fact_sources": sorted(
            (
                {
                    "fact_id": f.fact_id,
                    "kind": f.kind.value,
                    "evidence": sorted(
                        ({"quote": e.quote, "start": e.start, "end": e.end} for e in f.evidence),
                        key=lambda e: (e["start"], e["end"], e["quote"]),
                    ),
                }
                for f in s.fact_sources
            ),
            key=lambda f: (f["kind"], f["fact_id"]),
        ),
    }
