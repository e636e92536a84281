"""The I/O around the comparison: page through committed states, read the graph back, repair.

Per page of states: one read of their frozen plans (for each document's graph routing), one read
transaction per graph (database and base label) for all of the page's ids, and one PostgreSQL
read to confirm the documents found drifting (a state that moved on while it was being checked
is not drift: it is counted apart). Nothing is written unless ``repair`` is called.

``repair`` re-applies, per drifted document, the part of its last committed frozen plan that
touches the drifted elements (``drift.repair_plan``), fenced as the applier fences its graph
write: inside one PostgreSQL transaction that holds the document's lock, after checking that the
document is still at the revision that was checked and that no operation of it is in flight.
Re-publishing the plan would not do: its operation is COMPLETED, so a re-delivery is a duplicate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from graph_ingest.domain.errors import DependencyUnavailable, FingerprintMismatch, GraphIngestError
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.base import ReadWriteGraph
from graph_ingest.reconcile.drift import Drift, RepairPlan, compare, repair_plan, unlisted_in_graph
from graph_ingest.schemas.codec import DecodeError, decode_plan
from graph_ingest.store.base import OperationStore
from graph_ingest.store.documents import CommittedElements

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 500

DocumentKey = tuple[str, str]

# Failures of a service, not of one document: they stop the run (exit code "unavailable").
_SERVICE_CODES = frozenset({StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED})


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A document whose graph could not be compared (its frozen plan is missing or unreadable)."""

    space: str
    document_id: str
    revision: int
    operation_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class UnlistedNode:
    """A node the graph holds that no document's committed state lists."""

    database: str
    node_label: str
    node_id: str


@dataclass(frozen=True, slots=True)
class ScanReport:
    checked: int
    """Documents compared with the graph."""
    drifts: tuple[Drift, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()
    moved_on: int = 0
    """Documents found drifting whose state changed while they were checked (not reported)."""
    unlisted_nodes: tuple[UnlistedNode, ...] = ()
    """Nodes of the checked graphs that no committed state lists (whole scans only)."""

    @property
    def has_drift(self) -> bool:
        """Drift found, or not ruled out (a document could not be checked)."""
        return bool(self.drifts or self.unchecked or self.unlisted_nodes)


class RepairStatus(StrEnum):
    REPAIRED = "REPAIRED"
    SKIPPED = "SKIPPED"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class RepairOutcome:
    space: str
    document_id: str
    status: RepairStatus
    detail: str
    restored_nodes: int = 0
    restored_edges: int = 0
    removed_edges: int = 0


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    scan: ScanReport
    repairs: tuple[RepairOutcome, ...] = ()
    rescan: ScanReport | None = None
    """The scan after the repairs (``--repair`` only)."""

    @property
    def final(self) -> ScanReport:
        return self.scan if self.rescan is None else self.rescan


class Reconciler:
    def __init__(
        self, store: OperationStore, graph: ReadWriteGraph, *, page_size: int = DEFAULT_PAGE_SIZE
    ) -> None:
        self._store = store
        self._graph = graph
        self._page_size = page_size

    def run(
        self, *, space: str | None = None, document_id: str | None = None, repair: bool = False
    ) -> ReconcileResult:
        """Scan; with ``repair``, repair what drifted and scan again."""
        scan = self.scan(space=space, document_id=document_id)
        if not repair or not scan.drifts:
            return ReconcileResult(scan)
        repairs = tuple(self.repair(scan.drifts))
        return ReconcileResult(scan, repairs, self.scan(space=space, document_id=document_id))

    # -- scan ------------------------------------------------------------------------------

    def scan(self, *, space: str | None = None, document_id: str | None = None) -> ScanReport:
        checked = moved_on = 0
        drifts: list[Drift] = []
        unchecked: list[Unchecked] = []
        graphs: set[GraphOptions] = set()
        for page in self._store.iter_committed_elements(
            space=space, document_id=document_id, page_size=self._page_size
        ):
            page_drifts, page_unchecked = self._check_page(page, graphs)
            confirmed, moved = self._confirm(page_drifts)
            checked += len(page) - len(page_unchecked)
            drifts += confirmed
            unchecked += page_unchecked
            moved_on += moved
        # One document's check cannot see a node nothing lists any more: that takes a whole scan.
        unlisted = () if document_id is not None else self._unlisted_nodes(graphs)
        return ScanReport(checked, tuple(drifts), tuple(unchecked), moved_on, unlisted)

    def _unlisted_nodes(self, graphs: set[GraphOptions]) -> tuple[UnlistedNode, ...]:
        """Every node of the checked graphs that no committed state lists, paged by id."""
        found: list[UnlistedNode] = []
        for options in sorted(graphs, key=lambda g: (g.database, g.node_label)):
            after = ""
            while page := self._graph.node_ids_after(options, after, self._page_size):
                found += [
                    UnlistedNode(options.database, options.node_label, node_id)
                    for node_id in sorted(self._store.unlisted_nodes(page))
                ]
                after = page[-1]
        return tuple(found)

    def _check_page(
        self, page: list[CommittedElements], graphs: set[GraphOptions]
    ) -> tuple[list[Drift], list[Unchecked]]:
        routed, unchecked = self._routing(page)
        graphs.update(routed.values())
        by_graph: dict[GraphOptions, list[CommittedElements]] = {}
        for state in page:
            if state.key in routed:
                by_graph.setdefault(routed[state.key], []).append(state)
        drifts: list[Drift] = []
        for options, states in by_graph.items():
            node_ids = [n for s in states for n in s.node_ids]
            nodes, edges = self._graph.find_elements(
                options,
                node_ids,
                [k for s in states for k in (*s.edge_keys, *s.superseded_edge_keys)],
            )
            touching = self._graph.edges_touching(options, node_ids)
            candidates = [(s.key, k) for s in states for k in unlisted_in_graph(s, edges, touching)]
            claimed = self._store.claimed_edges(candidates) if candidates else set()
            for state in states:
                elsewhere = {k for document, k in claimed if document == state.key}
                drift = compare(state, nodes, edges, elsewhere, touching)
                if not drift.is_clean:
                    drifts.append(drift)
        return drifts, unchecked

    def _routing(
        self, page: list[CommittedElements]
    ) -> tuple[dict[DocumentKey, GraphOptions], list[Unchecked]]:
        """Each document's graph options, from the frozen plan of its state's operation."""
        plans = self._store.plan_bytes_of([s.operation_id for s in page])
        routed: dict[DocumentKey, GraphOptions] = {}
        unchecked: list[Unchecked] = []
        for state in page:
            data = plans.get(state.operation_id)
            if data is None:
                unchecked.append(_unchecked(state, "its operation's frozen plan is missing"))
                continue
            try:
                routed[state.key] = decode_plan(data).graph
            except DecodeError as exc:
                unchecked.append(_unchecked(state, f"its frozen plan cannot be decoded: {exc}"))
        return routed, unchecked

    def _confirm(self, drifts: list[Drift]) -> tuple[list[Drift], int]:
        """Drop drifts whose document moved on meanwhile; note operations in flight."""
        if not drifts:
            return [], 0
        keys = [d.key for d in drifts]
        with self._store.unit_of_work() as uow:
            current = uow.document_revisions(keys)
            in_flight = uow.in_flight_operations(keys)
        confirmed = []
        for drift in drifts:
            now = current.get(drift.key)
            if now is None or (now.revision, now.operation_id) != (
                drift.revision,
                drift.operation_id,
            ):
                continue
            ops = tuple(op.operation_id for op in in_flight.get(drift.key, ()))
            confirmed.append(replace(drift, in_flight=ops))
        return confirmed, len(drifts) - len(confirmed)

    # -- repair ----------------------------------------------------------------------------

    def repair(self, drifts: Sequence[Drift]) -> list[RepairOutcome]:
        """Repair each drifted document on its own (one failing does not stop the others;
        an unavailable service does)."""
        return [self._repair_one(drift) for drift in drifts]

    def _repair_one(self, drift: Drift) -> RepairOutcome:
        plan = self._frozen_plan(drift)
        if isinstance(plan, RepairOutcome):
            return plan
        repair = repair_plan(plan, drift)
        try:
            with self._store.unit_of_work() as uow:
                uow.lock_documents([drift.key])
                now = uow.document_revisions([drift.key]).get(drift.key)
                if now is None or (now.revision, now.operation_id) != (
                    drift.revision,
                    drift.operation_id,
                ):
                    where = "has no state" if now is None else f"is at revision {now.revision}"
                    return _outcome(
                        drift,
                        RepairStatus.SKIPPED,
                        f"the document moved on: it {where}, revision {drift.revision} was "
                        "checked; not repaired (check it again)",
                    )
                in_flight = uow.in_flight_operations([drift.key]).get(drift.key)
                if in_flight:
                    op = in_flight[0]
                    return _outcome(
                        drift,
                        RepairStatus.SKIPPED,
                        f"operation {op.operation_id} ({op.stage}) of the document is in flight "
                        "and will rewrite its graph; not repaired (check again once it is done)",
                    )
                if repair.mutation.is_empty:
                    return _outcome(
                        drift,
                        RepairStatus.FAILED,
                        f"nothing of the drift can be restored from plan {plan.operation_id} "
                        "(it does not upsert the missing elements)",
                    )
                self._graph.apply([(plan.graph, repair.mutation)])
        except GraphIngestError as exc:
            if isinstance(exc, DependencyUnavailable) or exc.code in _SERVICE_CODES:
                raise
            return _outcome(drift, RepairStatus.FAILED, f"[{exc.code}] {exc}")
        return _repaired(drift, plan, repair)

    def _frozen_plan(self, drift: Drift) -> IngestionPlan | RepairOutcome:
        data = self._store.get_plan_bytes(drift.operation_id)
        if data is None:
            return _outcome(
                drift, RepairStatus.FAILED, f"the frozen plan of {drift.operation_id} is missing"
            )
        try:
            plan = decode_plan(data)
            plan.verify_fingerprint()
        except (DecodeError, FingerprintMismatch) as exc:
            return _outcome(drift, RepairStatus.FAILED, f"its frozen plan is unusable: {exc}")
        if (plan.space, plan.document_id, plan.next_state.revision) != (
            drift.space,
            drift.document_id,
            drift.revision,
        ):
            return _outcome(
                drift,
                RepairStatus.FAILED,
                f"plan {plan.operation_id} is for {plan.key} revision {plan.next_state.revision}, "
                "not for this state",
            )
        return plan


def _unchecked(state: CommittedElements, reason: str) -> Unchecked:
    return Unchecked(state.space, state.document_id, state.revision, state.operation_id, reason)


def _outcome(drift: Drift, status: RepairStatus, detail: str) -> RepairOutcome:
    return RepairOutcome(drift.space, drift.document_id, status, detail)


def _repaired(drift: Drift, plan: IngestionPlan, repair: RepairPlan) -> RepairOutcome:
    """The outcome of a repair carried out (and its log line): what its mutation restored."""
    mutation = repair.mutation
    outcome = RepairOutcome(
        space=drift.space,
        document_id=drift.document_id,
        status=RepairStatus.REPAIRED,
        detail=_repaired_detail(plan, repair.unrestorable_nodes, repair.unrestorable_edges),
        restored_nodes=len(mutation.node_upserts),
        restored_edges=len(mutation.edge_upserts),
        removed_edges=len(mutation.edge_deletes),
    )
    log.info(
        "reconcile: repaired %s at revision %d from plan %s: %d node(s) and %d edge(s) "
        "restored, %d edge(s) removed",
        f"{drift.space}/{drift.document_id}",
        drift.revision,
        plan.operation_id,
        outcome.restored_nodes,
        outcome.restored_edges,
        outcome.removed_edges,
    )
    return outcome


def _repaired_detail(plan: IngestionPlan, nodes: Sequence[str], edges: Sequence[object]) -> str:
    detail = f"re-applied from plan {plan.operation_id}"
    if nodes or edges:
        detail += (
            f"; {len(nodes)} node(s) and {len(edges)} edge(s) are not in the plan's upserts "
            "and cannot be restored from it"
        )
    return detail
