"""An ingestion plan's content from what was resolved: node upserts, one edge per key (evidence
merged), fact sources, the document's next state and the mutation.

Pure: the planner decides what the new version drops (``StaleElements``, which needs the store);
this module only lays the pieces out, in the order the plan's fingerprint depends on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from graph_ingest.domain.candidates import CandidateEvidence, RelationCandidate
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert, PropertyValue
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.state import DocumentState, Evidence, FactKind, FactSource, fact_id_of
from graph_ingest.planning.identity import PlanIdentity
from graph_ingest.planning.resolution import Resolution

EdgePlan = tuple[dict[str, PropertyValue], tuple[CandidateEvidence, ...]]
"""An edge's properties and the evidence of every relation candidate that names it."""


@dataclass(frozen=True, slots=True)
class StaleElements:
    """The previous version's elements as the new state and mutation treat them."""

    node_ids: tuple[str, ...]
    superseded: tuple[EdgeKey, ...]
    kept: tuple[EdgeKey, ...]
    edge_deletes: tuple[EdgeKey, ...]
    node_deletes: tuple[str, ...]


def node_upserts(resolution: Resolution) -> list[NodeUpsert]:
    """One node per resolved entity: label = entity type, properties + ``name``."""
    return [
        NodeUpsert(
            node_id=entity.node_id,
            labels=(entity.entity_type,),
            properties={**entity.properties, "name": entity.name},
        )
        for entity in resolution.entities
    ]


def edges_of(
    relations: Sequence[RelationCandidate], resolution: Resolution
) -> dict[EdgeKey, EdgePlan]:
    """One edge per (source node, type, target node): properties first-seen, evidence merged."""
    edges: dict[EdgeKey, EdgePlan] = {}
    for relation in relations:
        key = EdgeKey(
            src=resolution.node_of(relation.source.entity_type, relation.source.name),
            type=relation.relation_type,
            dst=resolution.node_of(relation.target.entity_type, relation.target.name),
        )
        properties, evidence = edges.get(key, ({}, ()))
        edges[key] = (
            {**relation.properties, **properties},
            (*evidence, *relation.evidence),
        )
    return edges


def ingestion_state(
    request: IngestRequest,
    identity: PlanIdentity,
    resolution: Resolution,
    edges: Mapping[EdgeKey, EdgePlan],
    stale: StaleElements,
    *,
    schema_version: str,
    source_updated_at: datetime | None,
) -> DocumentState:
    """The document's state once the plan is applied: one revision on from its base."""
    return DocumentState(
        space=request.space,
        document_id=request.document_id,
        revision=identity.expected_revision + 1,
        operation_id=identity.operation_id,
        base_operation_id=identity.base_operation_id,
        content_hash=identity.content_hash,
        document_version=request.document_version,
        node_ids=stale.node_ids,
        edge_keys=tuple(sorted(edges, key=EdgeKey.sort_key)),
        superseded_edge_keys=stale.superseded,
        kept_edge_keys=stale.kept,
        fact_sources=tuple(
            [_fact(e.node_id, FactKind.NODE, e.evidence) for e in resolution.entities]
            + [_fact(fact_id_of(k), FactKind.EDGE, ev) for k, (_, ev) in edges.items()]
        ),
        schema_version=schema_version,
        extraction_fingerprint=identity.extraction_fingerprint,
        source_updated_at=source_updated_at,
    )


def ingestion_mutation(
    nodes: Sequence[NodeUpsert], edges: Mapping[EdgeKey, EdgePlan], stale: StaleElements
) -> Mutation:
    return Mutation(
        node_upserts=tuple(nodes),
        edge_upserts=tuple(
            EdgeUpsert(src=k.src, type=k.type, dst=k.dst, rank=k.rank, properties=props)
            for k, (props, _) in edges.items()
        ),
        edge_deletes=stale.edge_deletes,
        node_deletes=stale.node_deletes,
        detach_deleted_nodes=bool(stale.node_deletes),
        # only when there are deletes: a new document's plan keeps its fingerprint
        deletes_if_unreferenced=bool(stale.edge_deletes or stale.node_deletes),
    )


def _fact(fact_id: str, kind: FactKind, evidence: Iterable[CandidateEvidence]) -> FactSource:
    unique = {(e.start, e.end): Evidence(quote=e.quote, start=e.start, end=e.end) for e in evidence}
    return FactSource(fact_id=fact_id, kind=kind, evidence=tuple(unique[k] for k in sorted(unique)))


__all__ = [
    "EdgePlan",
    "StaleElements",
    "edges_of",
    "ingestion_mutation",
    "ingestion_state",
    "node_upserts",
]
