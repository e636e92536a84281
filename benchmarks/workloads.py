"""The benchmark's plans: small, large, hot-entity and update workloads, and the graph each
leaves behind.

Nodes carry only the workload's base label (no extra labels), so the pipeline and the ceiling
write the same statements' shape. Every node is registered as an entity; plans carry no fact
sources. ``updates`` is a second version of each small document, built on the first version's
``next_state`` (expected revision 1): it changes every node's properties, keeps half of the
edges (new properties), deletes the other half and adds as many new ones.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert, PropertyValue
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind
from graph_ingest.domain.state import DocumentState, EntityRegistration
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.schemas.plan_messages import plan_message

SPACE = "bench"
EDGE_TYPE = "LINKS"
HOT_NODES = 20
WARMUP_PLANS = 20


def node_id(document: str, index: int) -> str:
    return f"{SPACE}:{document}:{index}"


def hot_id(index: int) -> str:
    return f"{SPACE}:hot:{index}"


Props = Mapping[str, PropertyValue]


def plan(
    graph: GraphOptions,
    document: str,
    nodes: Sequence[tuple[str, Props]],
    edges: Sequence[tuple[str, str, Props]],
    *,
    previous: DocumentState | None = None,
) -> IngestionPlan:
    """A frozen plan of ``document``: upsert ``nodes`` and ``edges`` (src, dst, properties); on
    top of ``previous``, delete the edges it had that ``edges`` no longer names."""
    upserts = tuple(
        EdgeUpsert(src=s, type=EDGE_TYPE, dst=d, properties=dict(p)) for s, d, p in edges
    )
    keys = tuple(e.key for e in upserts)
    stale = tuple(k for k in previous.edge_keys if k not in keys) if previous else ()
    expected = previous.revision if previous else 0
    operation = f"op_bench_{uuid.uuid4().hex}"
    return IngestionPlan.freeze(
        kind=PlanKind.INGESTION,
        space=SPACE,
        document_id=document,
        document_version=str(expected + 1),
        operation_id=operation,
        expected_revision=expected,
        base_operation_id=previous.operation_id if previous else None,
        graph=graph,
        mutation=Mutation(
            node_upserts=tuple(NodeUpsert(node_id=n, properties=dict(p)) for n, p in nodes),
            edge_upserts=upserts,
            edge_deletes=stale,
        ),
        next_state=DocumentState(
            space=SPACE,
            document_id=document,
            revision=expected + 1,
            operation_id=operation,
            base_operation_id=previous.operation_id if previous else None,
            content_hash=f"sha256:{document}:{expected + 1}",
            document_version=str(expected + 1),
            node_ids=tuple(n for n, _ in nodes),
            edge_keys=keys,
            superseded_edge_keys=stale,
        ),
        registrations=tuple(
            EntityRegistration(
                space=SPACE, entity_type="Thing", name=n, normalized_name=n, node_id=n
            )
            for n, _ in nodes
        ),
    )


def ring_plan(graph: GraphOptions, document: str, size: int) -> IngestionPlan:
    """``size`` nodes of the document and ``size`` edges linking them in a ring."""
    ids = [node_id(document, i) for i in range(size)]
    return plan(
        graph,
        document,
        [(n, {"name": n, "rank": i}) for i, n in enumerate(ids)],
        [(ids[i], ids[(i + 1) % size], {"w": i}) for i in range(size)],
    )


def small_plans(count: int, graph: GraphOptions, prefix: str = "doc") -> list[IngestionPlan]:
    """``count`` plans of 10 nodes + 10 edges, each of its own document and nodes."""
    return [ring_plan(graph, f"{prefix}-{d}", 10) for d in range(count)]


def large_plans(count: int, graph: GraphOptions) -> list[IngestionPlan]:
    return [ring_plan(graph, f"big-{d}", 1000) for d in range(count)]


def hot_plans(count: int, graph: GraphOptions) -> list[IngestionPlan]:
    """10 nodes + 10 edges a plan, half of the edges to 5 of 20 shared nodes (which the plan
    upserts too, as entity plans of one space do): 5 own nodes in a ring, each linked to a hot
    node."""
    plans = []
    for d in range(count):
        document = f"hot-{d}"
        own = [node_id(document, i) for i in range(5)]
        hot = [hot_id((d * 5 + i) % HOT_NODES) for i in range(5)]
        nodes: list[tuple[str, Props]] = [(n, {"name": n, "rank": i}) for i, n in enumerate(own)]
        nodes += [(h, {"name": h, "last_seen_in": document}) for h in hot]
        plans.append(
            plan(
                graph,
                document,
                nodes,
                [(own[i], own[(i + 1) % 5], {"w": i}) for i in range(5)]
                + [(own[i], hot[i], {"w": 5 + i}) for i in range(5)],
            )
        )
    return plans


def second_version(graph: GraphOptions, first: IngestionPlan) -> IngestionPlan:
    """v2 of a small ring document: new properties everywhere; edges from even nodes kept, those
    from odd nodes replaced by a chord to the node after next."""
    document = first.document_id
    ids = [n.node_id for n in first.mutation.node_upserts]
    size = len(ids)
    kept = [(ids[i], ids[(i + 1) % size], {"w": i, "v": 2}) for i in range(0, size, 2)]
    chords = [(ids[i], ids[(i + 2) % size], {"w": i, "v": 2}) for i in range(1, size, 2)]
    return plan(
        graph,
        document,
        [(n, {"name": n, "rank": i + 100, "v": 2}) for i, n in enumerate(ids)],
        kept + chords,
        previous=first.next_state,
    )


@dataclass(frozen=True)
class Workload:
    """What one benchmark case applies: ``warmup`` and ``setup`` first (not measured), then the
    measured ``plans``. ``setup`` is empty or one plan per document of ``plans``, in order."""

    name: str
    graph: GraphOptions
    plans: tuple[IngestionPlan, ...]
    setup: tuple[IngestionPlan, ...] = ()
    warmup: tuple[IngestionPlan, ...] = ()
    _messages: dict[str, OutboxMessage] = field(default_factory=dict, compare=False, repr=False)

    @property
    def elements(self) -> int:
        """Nodes and edges the measured plans upsert or delete."""
        return sum(p.mutation.element_count for p in self.plans)

    @property
    def applied(self) -> tuple[IngestionPlan, ...]:
        """Every plan, in the order it is applied."""
        return (*self.warmup, *self.setup, *self.plans)

    def prefix(self, count: int) -> Workload:
        """The first ``count`` documents of this workload (same warm-up)."""
        return dataclasses.replace(
            self, plans=self.plans[:count], setup=self.setup[:count], _messages=self._messages
        )

    def messages(self, plans: Iterable[IngestionPlan], topic: str) -> list[OutboxMessage]:
        """The Kafka messages of ``plans`` on ``topic``; each plan is verified and encoded
        once per workload (``plan_message``), whichever run asks first."""
        out = []
        for p in plans:
            message = self._messages.get(p.operation_id)
            if message is None:
                message = self._messages[p.operation_id] = plan_message(p, topic)
            out.append(dataclasses.replace(message, topic=topic))
        return out


def expected_graph(plans: Iterable[IngestionPlan]) -> tuple[set[str], set[EdgeKey]]:
    """The node ids and edge keys the graph holds after applying ``plans`` in order."""
    nodes: set[str] = set()
    edges: set[EdgeKey] = set()
    for p in plans:
        m = p.mutation
        nodes.difference_update(m.node_deletes)
        nodes.update(n.node_id for n in m.node_upserts)
        edges.difference_update(m.edge_deletes)
        edges.update(e.key for e in m.edge_upserts)
    return nodes, edges


def _with_warmup(
    name: str,
    graph: GraphOptions,
    plans: Sequence[IngestionPlan],
    setup: Sequence[IngestionPlan] = (),
) -> Workload:
    warmup = tuple(small_plans(WARMUP_PLANS, graph, prefix="warm"))
    return Workload(name, graph, tuple(plans), tuple(setup), warmup)


def build(kind: str, count: int, graph: GraphOptions) -> Workload:
    """The workload ``kind`` (small, large, hot, updates, scale-<n>) with ``count`` plans."""
    name = kind if not kind.startswith("scale") else f"scale-{count}"
    if kind in ("small", "scale"):
        return _with_warmup(name, graph, small_plans(count, graph))
    if kind == "large":
        return _with_warmup(name, graph, large_plans(count, graph))
    if kind == "hot":
        return _with_warmup(name, graph, hot_plans(count, graph))
    if kind == "updates":
        first = small_plans(count, graph)
        return _with_warmup(name, graph, [second_version(graph, p) for p in first], first)
    raise ValueError(f"unknown workload {kind!r}")
