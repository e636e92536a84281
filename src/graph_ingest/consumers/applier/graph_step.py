"""The apply algorithm's second step (``apply``): the graph write, fenced by the document locks.

With the batch's documents locked and their revisions checked again, the entities are registered
(a registry conflict refuses the plan here, before anything is written), the mutations written
in one graph transaction and GRAPH_APPLIED recorded — one PostgreSQL transaction around the graph
write, so a zombie (a worker that lost its partitions) never writes a plan whose document has
moved on. A plan's conditional deletes are dropped here for elements another document lists now.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from graph_ingest.consumers.applier.work import PlanWork, documents
from graph_ingest.domain.admission import applies_onto
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.base import GraphWriter
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.store.base import OperationStore, UnitOfWork

log = logging.getLogger(__name__)


class DocumentMovedOn(GraphIngestError):
    """Between admission and the graph write another worker moved a document of the batch on.

    Nothing of the batch is written; admitting the batch again decides each plan afresh."""

    code = StatusCode.ABORTED


def write_graph(
    store: OperationStore,
    graph: GraphWriter,
    admitted: Sequence[PlanWork],
    clock: Callable[[], datetime],
) -> None:
    """Registrations, the graph write and GRAPH_APPLIED, fenced by the document locks."""
    to_write = [w for w in admitted if w.operation.stage is Stage.PREPARED]
    if not to_write:
        return
    locked = documents(to_write)
    with store.unit_of_work() as uow:
        uow.lock_documents(locked)
        _refuse_moved_on(to_write, uow.document_revisions(locked))
        mutations = _guarded_mutations(uow, to_write)
        uow.register_entities([r for w in to_write for r in w.plan.registrations])
        graph.apply(
            [(w.plan.graph, m) for w, m in zip(to_write, mutations, strict=True) if not m.is_empty]
        )
        now = clock()
        for work in to_write:
            work.move(Stage.GRAPH_APPLIED, at=now)
        uow.save_operations([op for w in to_write for op in w.flush_changes()])


def _refuse_moved_on(
    to_write: Sequence[PlanWork], revisions: dict[tuple[str, str], CommittedRevision]
) -> None:
    """Raise DocumentMovedOn when a plan no longer applies onto its document's revision."""
    moved = [w for w in to_write if not applies_onto(w.plan, revisions.get(w.document))]
    if not moved:
        return
    first = moved[0]
    at = revisions.get(first.document)
    raise DocumentMovedOn(
        f"{first.message.context()}: document {first.plan.key} is at revision "
        f"{at.revision if at else 0} ({at.operation_id if at else 'no state'}), the "
        f"plan expects {first.plan.expected_revision} "
        f"({first.plan.base_operation_id or 'no state'}); another worker moved it on "
        f"({len(moved)} plan(s) of the batch): nothing written, admitting again"
    )


def _conditional_deletes(mutation: Mutation) -> bool:
    return mutation.deletes_if_unreferenced and bool(mutation.node_deletes or mutation.edge_deletes)


def _guarded_mutations(uow: UnitOfWork, to_write: Sequence[PlanWork]) -> list[Mutation]:
    """Each plan's mutation, less the conditional deletes (``deletes_if_unreferenced``) of nodes
    and edges another document lists now.

    A plan decides its deletes when it is planned (what no other document listed then); by the
    time it applies, another document may have committed, or written to the graph, the same
    element. Every node lock of the batch is taken in one statement (the locks the registry
    takes; a stable order, so appliers cannot deadlock on them) and held until GRAPH_APPLIED:
    an upsert of another document is then either recorded already (committed, or written and at
    GRAPH_APPLIED: its delete is skipped here) or comes after this write (and recreates it)."""
    deleting = [w for w in to_write if _conditional_deletes(w.plan.mutation)]
    if not deleting:
        return [w.plan.mutation for w in to_write]
    nodes = [(w.document, n) for w in deleting for n in w.plan.mutation.node_deletes]
    edges = [(w.document, k) for w in deleting for k in w.plan.mutation.edge_deletes]
    uow.lock_nodes(
        [(d[0], n) for d, n in nodes]
        + [(d[0], end) for d, k in edges for end in (k.src, k.dst)]
        + [(r.space, r.node_id) for w in to_write for r in w.plan.registrations]
    )
    kept_nodes, kept_edges = uow.listed_elsewhere(nodes, edges)
    for document, data in uow.graph_applied_plans(sorted({w.plan.space for w in deleting})):
        state = decode_plan(data).next_state
        listed_nodes, listed_edges = set(state.node_ids), {*state.edge_keys, *state.kept_edge_keys}
        kept_nodes |= {(d, n) for d, n in nodes if d != document and n in listed_nodes}
        kept_edges |= {(d, k) for d, k in edges if d != document and k in listed_edges}
    if kept_nodes or kept_edges:
        log.info(
            "%d node and %d edge delete(s) skipped: another document lists them now",
            len(kept_nodes),
            len(kept_edges),
        )
    return [
        w.plan.mutation.model_copy(
            update={
                "node_deletes": tuple(
                    n for n in w.plan.mutation.node_deletes if (w.document, n) not in kept_nodes
                ),
                "edge_deletes": tuple(
                    k for k in w.plan.mutation.edge_deletes if (w.document, k) not in kept_edges
                ),
            }
        )
        if _conditional_deletes(w.plan.mutation)
        else w.plan.mutation
        for w in to_write
    ]
