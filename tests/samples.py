"""Sample plans for the tests: small documents about people and companies.

Hand-built plans (no extraction): a list of entities and relations becomes a frozen plan against
the document's previous state, so applier tests need no planner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from graph_ingest.domain.fingerprint import fingerprint_of
from graph_ingest.domain.ids import content_hash, derive_operation_id
from graph_ingest.domain.mutation import EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind, Provenance
from graph_ingest.domain.state import (
    DocumentState,
    EntityRegistration,
    Evidence,
    FactKind,
    FactSource,
    fact_id_of,
    normalize_name,
)
from graph_ingest.schemas import headers as kafka_headers


@dataclass(frozen=True)
class Entity:
    type: str
    name: str
    aliases: tuple[str, ...] = ()

    def node_id(self, space: str) -> str:
        return f"{space}:{self.type.lower()}:{normalize_name(self.name).replace(' ', '-')}"


@dataclass(frozen=True)
class Relation:
    src: Entity
    type: str
    dst: Entity


def sample_plan(
    space: str,
    document_id: str,
    text: str,
    entities: Sequence[Entity],
    relations: Sequence[Relation],
    *,
    previous: DocumentState | None = None,
    graph: GraphOptions | None = None,
    dropped: Sequence[Entity] = (),
) -> IngestionPlan:
    """Plan the document against ``previous`` (None for a new document): upsert what it says now,
    delete the edges the previous version said and this one no longer does, and the ``dropped``
    entities' nodes (those only it listed: the caller knows which)."""
    nodes = [
        NodeUpsert(
            node_id=e.node_id(space),
            labels=(e.type,),
            properties={"name": e.name, "space": space},
        )
        for e in entities
    ]
    edges = [
        EdgeUpsert(src=r.src.node_id(space), type=r.type, dst=r.dst.node_id(space))
        for r in relations
    ]
    edge_keys = tuple(e.key for e in edges)
    superseded = tuple(k for k in (previous.edge_keys if previous else ()) if k not in edge_keys)
    expected = previous.revision if previous else 0
    extraction = fingerprint_of(
        {
            "entities": sorted([e.type, e.name] for e in entities),
            "relations": sorted([r.src.name, r.type, r.dst.name] for r in relations),
        }
    )
    digest = content_hash(text)
    base = previous.operation_id if previous else None
    operation_id = derive_operation_id(space, document_id, expected, digest, extraction, base)
    version = str(expected + 1)
    state = DocumentState(
        space=space,
        document_id=document_id,
        revision=expected + 1,
        operation_id=operation_id,
        base_operation_id=base,
        content_hash=digest,
        document_version=version,
        node_ids=tuple(n.node_id for n in nodes),
        edge_keys=edge_keys,
        superseded_edge_keys=superseded,
        fact_sources=tuple(
            [_fact(n.node_id, FactKind.NODE, text, n.properties["name"]) for n in nodes]
            + [_fact(fact_id_of(k), FactKind.EDGE, text, k.type) for k in edge_keys]
        ),
    )
    return IngestionPlan.freeze(
        kind=PlanKind.INGESTION,
        space=space,
        document_id=document_id,
        document_version=version,
        operation_id=operation_id,
        expected_revision=expected,
        base_operation_id=base,
        graph=graph or GraphOptions(),
        mutation=Mutation(
            node_upserts=tuple(nodes),
            edge_upserts=tuple(edges),
            edge_deletes=superseded,
            node_deletes=tuple(e.node_id(space) for e in dropped),
            detach_deleted_nodes=bool(dropped),
        ),
        next_state=state,
        registrations=tuple(
            EntityRegistration(
                space=space,
                entity_type=e.type,
                name=e.name,
                normalized_name=normalize_name(e.name),
                node_id=e.node_id(space),
                aliases=e.aliases,
            )
            for e in entities
        ),
        provenance=Provenance(extractor="test-samples", model=None, prompt_version=None),
    )


def work_headers_of(plan: IngestionPlan) -> dict[str, str]:
    """A traceparent and a submission id of the plan's own, as a producer would send them."""
    digest = hashlib.sha256(plan.operation_id.encode()).hexdigest()
    return {
        kafka_headers.TRACEPARENT: f"00-{digest[:32]}-{digest[32:48]}-01",
        kafka_headers.SUBMISSION_ID: f"sub-{plan.operation_id}",
    }


def _fact(fact_id: str, kind: FactKind, text: str, needle: object) -> FactSource:
    start = text.find(str(needle))
    evidence = (
        (Evidence(quote=str(needle), start=start, end=start + len(str(needle))),)
        if start >= 0
        else ()
    )
    return FactSource(fact_id=fact_id, kind=kind, evidence=evidence)
