"""Batch selection: pure logic, no Kafka.

The meaning of a batch is arrival order: the graph and every plan's outcome end as if the plans
had been applied one by one, in the order they arrived. The graph writer runs a batch in phases
(edge deletes, node deletes, node upserts merged per node, edge upserts merged per edge; see
``graph/cypher.py``), so a plan joins a batch only where the phases cannot tell the difference.
A plan *touches* the nodes and edges it upserts or deletes and the endpoints of those edges; an
endpoint it does not upsert itself it only *names* (it needs the node to exist). A later plan
stays out of the batch if

* an earlier member is of the same document (revision order);
* it deletes what an earlier member touches, or touches what an earlier member deletes;
* it upserts a node that an earlier member named before any member upserted it (in arrival
  order that earlier plan found no such node: an edge's endpoints must exist in the graph before
  the plan, or be upserted by the plan itself or by a plan that arrived earlier).

A deferred plan, whatever deferred it (these rules, the count, byte or lock bound), holds back
every later plan of its document and every later plan that touches what it touches, except where
the two commute: both only name the same node, or both upsert the same element with equal values for
every property they both set. Nothing overtakes a plan whose effect it could change or see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.kafka.records import Position

NodeRef = tuple[str, str]  # (graph, node id); graph = database/base label
EdgeRef = tuple[str, str, str, str, int]  # (graph, src, type, dst, rank)
Properties = Mapping[str, PropertyValue]
Element = TypeVar("Element", NodeRef, EdgeRef)


class _Disputed(Enum):
    """Deferred upserts of one element set a property to different values: any later value of
    it conflicts with one of them."""

    VALUE = "disputed"


DeferredValues = dict[str, PropertyValue | _Disputed]  # per property, what deferred upserts set


@dataclass(frozen=True, slots=True)
class _Footprint:
    """What one plan touches, every element scoped by its graph."""

    document: tuple[str, str]
    node_upserts: Mapping[NodeRef, Properties]
    deleted_nodes: frozenset[NodeRef]
    named_nodes: frozenset[NodeRef]  # edge endpoints the plan does not upsert
    edge_upserts: Mapping[EdgeRef, Properties]
    deleted_edges: frozenset[EdgeRef]

    @classmethod
    def of(cls, plan: IngestionPlan) -> _Footprint:
        graph = plan.graph.database + "/" + plan.graph.node_label
        mutation = plan.mutation
        node_upserts = {(graph, n.node_id): n.properties for n in mutation.node_upserts}
        edge_upserts = {
            (graph, e.src, e.type, e.dst, e.rank): e.properties for e in mutation.edge_upserts
        }
        deleted_edges = frozenset(
            (graph, e.src, e.type, e.dst, e.rank) for e in mutation.edge_deletes
        )
        endpoints = {(graph, end) for e in (*edge_upserts, *deleted_edges) for end in (e[1], e[3])}
        return cls(
            document=(plan.space, plan.document_id),
            node_upserts=node_upserts,
            deleted_nodes=frozenset((graph, n) for n in mutation.node_deletes),
            named_nodes=frozenset(endpoints.difference(node_upserts)),
            edge_upserts=edge_upserts,
            deleted_edges=deleted_edges,
        )

    @property
    def touched_nodes(self) -> frozenset[NodeRef]:
        return self.deleted_nodes.union(self.node_upserts, self.named_nodes)

    @property
    def edges(self) -> frozenset[EdgeRef]:
        return self.deleted_edges.union(self.edge_upserts)


@dataclass(slots=True)
class _Batch:
    """The union of the members' footprints, as the in-batch rules need it."""

    documents: set[tuple[str, str]] = field(default_factory=set)
    touched_nodes: set[NodeRef] = field(default_factory=set)
    upserted_nodes: set[NodeRef] = field(default_factory=set)
    deleted_nodes: set[NodeRef] = field(default_factory=set)
    named_before_upserted: set[NodeRef] = field(default_factory=set)
    edges: set[EdgeRef] = field(default_factory=set)
    deleted_edges: set[EdgeRef] = field(default_factory=set)

    def admits(self, plan: _Footprint) -> bool:
        return not (
            plan.document in self.documents
            or not plan.deleted_nodes.isdisjoint(self.touched_nodes)
            or not self.deleted_nodes.isdisjoint(plan.touched_nodes)
            or not self.named_before_upserted.isdisjoint(plan.node_upserts)
            or not plan.deleted_edges.isdisjoint(self.edges)
            or not self.deleted_edges.isdisjoint(plan.edges)
        )

    def add(self, plan: _Footprint) -> None:
        self.documents.add(plan.document)
        self.named_before_upserted |= plan.named_nodes.difference(self.upserted_nodes)
        self.touched_nodes |= plan.touched_nodes
        self.upserted_nodes.update(plan.node_upserts)
        self.deleted_nodes |= plan.deleted_nodes
        self.edges |= plan.edges
        self.deleted_edges |= plan.deleted_edges


@dataclass(slots=True)
class _Deferred:
    """The union of the deferred plans' footprints: what no later plan may overtake.

    A deferred footprint is folded into the union only when a later plan is checked against it:
    in a backlog past the batch's bounds every later plan is deferred by the bound alone, and
    folding each of them (a large plan's thousands of elements) at every batch would cost more
    than the rest of the selection."""

    documents: set[tuple[str, str]] = field(default_factory=set)
    touched_nodes: set[NodeRef] = field(default_factory=set)
    deleted_nodes: set[NodeRef] = field(default_factory=set)
    named_nodes: set[NodeRef] = field(default_factory=set)
    node_upserts: dict[NodeRef, DeferredValues] = field(default_factory=dict)
    edges: set[EdgeRef] = field(default_factory=set)
    deleted_edges: set[EdgeRef] = field(default_factory=set)
    edge_upserts: dict[EdgeRef, DeferredValues] = field(default_factory=dict)
    unfolded: list[_Footprint] = field(default_factory=list)

    def holds_back(self, plan: _Footprint) -> bool:
        self._fold()
        return (
            plan.document in self.documents
            or not plan.deleted_nodes.isdisjoint(self.touched_nodes)
            or not plan.named_nodes.isdisjoint(self.deleted_nodes)
            or not plan.named_nodes.isdisjoint(self.node_upserts)
            or not self.deleted_nodes.isdisjoint(plan.node_upserts)
            or not self.named_nodes.isdisjoint(plan.node_upserts)
            or _disagree(self.node_upserts, plan.node_upserts)
            or not plan.deleted_edges.isdisjoint(self.edges)
            or not self.deleted_edges.isdisjoint(plan.edge_upserts)
            or _disagree(self.edge_upserts, plan.edge_upserts)
        )

    def add(self, plan: _Footprint) -> None:
        self.unfolded.append(plan)

    def _fold(self) -> None:
        for plan in self.unfolded:
            self.documents.add(plan.document)
            self.touched_nodes |= plan.touched_nodes
            self.deleted_nodes |= plan.deleted_nodes
            self.named_nodes |= plan.named_nodes
            _record(self.node_upserts, plan.node_upserts)
            self.edges |= plan.edges
            self.deleted_edges |= plan.deleted_edges
            _record(self.edge_upserts, plan.edge_upserts)
        self.unfolded.clear()


def _record(deferred: dict[Element, DeferredValues], upserts: Mapping[Element, Properties]) -> None:
    for element, properties in upserts.items():
        values = deferred.setdefault(element, {})
        for name, value in properties.items():
            agreed = name not in values or _same_value(values[name], value)
            values[name] = value if agreed else _Disputed.VALUE


def _disagree(
    deferred: Mapping[Element, DeferredValues], later: Mapping[Element, Properties]
) -> bool:
    """Whether a later upsert sets a property of an element to another value than a deferred
    upsert of it does (then their order decides the value, and the later one must run later)."""
    return any(
        not _same_value(values[name], value)
        for element, properties in later.items()
        if (values := deferred.get(element)) is not None
        for name, value in properties.items()
        if name in values
    )


def _same_value(a: PropertyValue | _Disputed, b: PropertyValue | _Disputed) -> bool:
    # Not plain ==: Python has 1 == 1.0 == True, which Neo4j stores as three different values.
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same_value, a, b))
    return type(a) is type(b) and a == b


def node_locks(plan: IngestionPlan) -> int:
    """The PostgreSQL locks the graph step takes for ``plan``, at most: an advisory lock per
    node it registers and per node its conditional deletes check (an edge's two ends)."""
    mutation = plan.mutation
    deletes = (
        len(mutation.node_deletes) + 2 * len(mutation.edge_deletes)
        if mutation.deletes_if_unreferenced
        else 0
    )
    return len(plan.registrations) + deletes


Footprints = dict[Position, _Footprint]
"""The deferred plans' footprints by position, kept by the caller from one ``select_batch``
to the next (a record's plan never changes, so neither does its footprint)."""


def select_batch(
    pending: Sequence[PlanMessage],
    max_plans: int,
    max_bytes: int,
    max_locks: int | None = None,
    footprints: Footprints | None = None,
) -> tuple[list[PlanMessage], list[PlanMessage]]:
    """Split ``pending`` (in arrival order) into (batch, deferred), by the rules above.

    ``max_locks`` bounds the batch's ``node_locks`` (None: no bound): PostgreSQL's lock table
    is shared and fixed, and a batch past it fails ("out of shared memory"). Like the byte
    bound, it never keeps a plan out of an empty batch. ``footprints``: the same dict at every
    call, so a plan deferred again is not walked again (it is left holding the deferred plans'
    footprints only). Undecodable messages always join the batch: they only need to be recorded
    as rejected.
    """
    batch: list[PlanMessage] = []
    deferred: list[PlanMessage] = []
    members = _Batch()
    held = _Deferred()
    size = locks = 0
    known = footprints if footprints is not None else {}
    kept: Footprints = {}
    for message in pending:
        if message.plan is None:
            batch.append(message)
            continue
        if len(batch) >= max_plans:  # no later plan can join: their footprints do not matter
            deferred.append(message)
            if (known_footprint := known.get(message.position)) is not None:
                kept[message.position] = known_footprint
            continue
        footprint = known.get(message.position) or _Footprint.of(message.plan)
        value_size = len(message.value or b"")
        plan_locks = node_locks(message.plan)
        if (
            (batch and size + value_size > max_bytes)
            or (batch and max_locks is not None and locks + plan_locks > max_locks)
            or held.holds_back(footprint)
            or not members.admits(footprint)
        ):
            deferred.append(message)
            held.add(footprint)
            kept[message.position] = footprint
            continue
        batch.append(message)
        size += value_size
        locks += plan_locks
        members.add(footprint)
    if footprints is not None:
        footprints.clear()
        footprints.update(kept)
    return batch, deferred
