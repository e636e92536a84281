"""Pure comparison and repair planning: a committed state against what the graph returned.

* **missing**: a node id or edge key the state lists that the graph does not hold;
* **unexpected**: an edge the graph holds that touches one of the state's nodes, or that the
  state lists as superseded, that the state does not list (among its edges or the edges KEEP
  kept) and that no other document's committed state lists either (then it belongs to that
  document, and deleting it would only move the drift there). This finds the leftovers of any
  lineage, not only what the last revision said it removed.

Nodes that no committed state lists at all are found by the scan as a whole (``unlisted``).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.store.documents import CommittedElements


@dataclass(frozen=True, slots=True)
class Drift:
    """How one document's part of the graph differs from its committed state (sorted)."""

    space: str
    document_id: str
    revision: int
    operation_id: str
    missing_nodes: tuple[str, ...] = ()
    missing_edges: tuple[EdgeKey, ...] = ()
    unexpected_edges: tuple[EdgeKey, ...] = ()
    in_flight: tuple[str, ...] = ()
    """Operations of the document that may be rewriting its graph right now (the drift may be
    transient); filled in by the scan, not by ``compare``."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.space, self.document_id)

    @property
    def is_clean(self) -> bool:
        return not (self.missing_nodes or self.missing_edges or self.unexpected_edges)


def unlisted_in_graph(
    state: CommittedElements, present_edges: Set[EdgeKey], touching: Set[EdgeKey] = frozenset()
) -> tuple[EdgeKey, ...]:
    """The edges the graph holds around ``state`` that it does not list (candidates for
    "unexpected"): its superseded edges still present, and any edge with an end among its nodes.

    ``touching`` may hold edges around other documents' nodes too (a page's worth)."""
    own = {*state.edge_keys, *state.kept_edge_keys}
    nodes = set(state.node_ids)
    around = (k for k in touching if k.src in nodes or k.dst in nodes)
    superseded = (k for k in state.superseded_edge_keys if k in present_edges)
    return tuple(sorted({*around, *superseded} - own, key=EdgeKey.sort_key))


def compare(
    state: CommittedElements,
    present_nodes: Set[str],
    present_edges: Set[EdgeKey],
    claimed_elsewhere: Set[EdgeKey] = frozenset(),
    touching: Set[EdgeKey] = frozenset(),
) -> Drift:
    """The drift of one document, given which of its elements the graph holds.

    ``present_*`` and ``touching`` may hold more than this document's elements (a page's
    worth); only membership is asked. ``claimed_elsewhere``: edges around it that another
    document lists as its own.
    """
    unexpected = [
        k for k in unlisted_in_graph(state, present_edges, touching) if k not in claimed_elsewhere
    ]
    return Drift(
        space=state.space,
        document_id=state.document_id,
        revision=state.revision,
        operation_id=state.operation_id,
        missing_nodes=tuple(sorted(n for n in set(state.node_ids) if n not in present_nodes)),
        missing_edges=tuple(
            sorted(
                (k for k in set(state.edge_keys) if k not in present_edges), key=EdgeKey.sort_key
            )
        ),
        unexpected_edges=tuple(sorted(set(unexpected), key=EdgeKey.sort_key)),
    )


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """The part of the frozen plan's mutation that undoes a drift, and what it cannot restore."""

    mutation: Mutation
    unrestorable_nodes: tuple[str, ...] = ()
    unrestorable_edges: tuple[EdgeKey, ...] = ()


def repair_plan(plan: IngestionPlan, drift: Drift) -> RepairPlan:
    """Restrict ``plan``'s mutation to the drifted elements.

    Missing nodes and edges are upserted as the plan upserts them (labels, properties);
    unexpected edges are deleted. The rest of the plan is not re-applied: its other upserts would
    overwrite properties that later plans of other documents set on shared nodes, and its node
    deletes could remove nodes other documents have upserted since. A missing element the plan
    does not upsert (a plan that carried only a delta) cannot be restored from it.
    """
    missing_nodes = set(drift.missing_nodes)
    missing_edges = set(drift.missing_edges)
    nodes = tuple(n for n in plan.mutation.node_upserts if n.node_id in missing_nodes)
    edges = tuple(e for e in plan.mutation.edge_upserts if e.key in missing_edges)
    restored_nodes = {n.node_id for n in nodes}
    restored_edges = {e.key for e in edges}
    return RepairPlan(
        mutation=Mutation(
            node_upserts=nodes, edge_upserts=edges, edge_deletes=drift.unexpected_edges
        ),
        unrestorable_nodes=tuple(n for n in drift.missing_nodes if n not in restored_nodes),
        unrestorable_edges=tuple(k for k in drift.missing_edges if k not in restored_edges),
    )
