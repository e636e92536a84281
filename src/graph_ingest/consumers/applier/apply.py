"""The apply algorithm (DESIGN.md §4) over a batch of plans: three PostgreSQL transactions and
one Neo4j transaction per batch, whatever its size.

1. admit: create-or-verify every operation with its frozen plan and decide what to do with it
   (``admission.decide``: duplicate, repair, conflict, parked, or go on);
2. graph: with the batch's documents locked and their revisions checked again, register the
   entities (a registry conflict refuses the plan here, before anything is written), write the
   mutations in one graph transaction and record GRAPH_APPLIED — one PostgreSQL transaction around
   the graph write, so a zombie (a worker that lost its partitions) never writes a plan whose
   document has moved on;
3. commit: state compare-and-set, history, fact sources, STATE_COMMITTED and COMPLETED, and the
   release of plans parked behind the new revisions — one transaction.

Every step takes the locks of its documents first (``UnitOfWork.lock_documents``), so a decision
to park and the release after a commit cannot miss each other. Every stage change goes to the
outbox in the transaction that makes it. How a failure is treated follows from its code
(``resilience.policy``): a batch is split until the plan at fault is alone, and only that plan is
routed, to the next retry tier or the DLQ (``routing``); failures of a service, not of a plan,
propagate so the caller retries the batch in place. Every step is idempotent on re-entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from graph_ingest.consumers.applier.ladder import journey_start
from graph_ingest.consumers.applier.routing import Failure, FailureRouter, Follower, Ladder
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.dlq.entries import dlq_message, with_status
from graph_ingest.dlq.purge import leader_purged
from graph_ingest.domain.admission import (
    Verdict,
    applies_onto,
    binding_mismatch,
    conflict_reason,
    decide,
    orphan_reason,
    unless_orphaned,
)
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.base import GraphWriter
from graph_ingest.kafka import headers as kafka_headers
from graph_ingest.producers.plan_publisher import sized_plan_message
from graph_ingest.resilience.classify import classify, error_info
from graph_ingest.resilience.policy import (
    BatchAction,
    LonePlanAction,
    RouteKind,
    batch_action,
    lone_plan_action,
)
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.store.base import OperationStore, UnitOfWork
from graph_ingest.store.operations import NewOperation

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Position = tuple[str, int, int]


class Outcome(StrEnum):
    COMPLETED = "COMPLETED"
    DUPLICATE = "DUPLICATE"
    CONFLICT = "CONFLICT"
    PARKED = "PARKED"
    RETRYING = "RETRYING"  # copied to the next retry tier
    DEAD_LETTERED = "DEAD_LETTERED"
    DROPPED = "DROPPED"  # a stray copy of a dead-lettered plan (``stray_copy``)


_OUTCOME_OF_ROUTE = {RouteKind.TIER: Outcome.RETRYING, RouteKind.DLQ: Outcome.DEAD_LETTERED}


_OUTCOME_OF_VERDICT = {
    Verdict.DUPLICATE: Outcome.DUPLICATE,
    Verdict.STALE: Outcome.CONFLICT,
    Verdict.REPAIR: Outcome.DUPLICATE,
    Verdict.CONFLICT: Outcome.CONFLICT,
    Verdict.PARK: Outcome.PARKED,
}


class DocumentMovedOn(GraphIngestError):
    """Between admission and the graph write another worker moved a document of the batch on.

    Nothing of the batch is written; admitting the batch again decides each plan afresh."""

    code = StatusCode.ABORTED


class DependencyUnhealthy(DependencyUnavailable):
    """A plan failed alone and a probe of the services failed too: the service is to blame."""


@dataclass
class _Work:
    """One plan on its way through the steps, with every snapshot it passed through."""

    message: PlanMessage
    plan: IngestionPlan
    operation: Operation
    changes: list[Operation]

    @property
    def document(self) -> tuple[str, str]:
        return (self.plan.space, self.plan.document_id)

    def move(self, *stages: Stage, at: datetime, reason: ErrorInfo | None = None) -> None:
        """Walk through ``stages``; ``reason`` explains the last one (why CONFLICT or PARKED)."""
        for index, stage in enumerate(stages, start=1):
            explained = reason if index == len(stages) else None
            self.operation = self.operation.transition(stage, at, explained)
            self.changes.append(self.operation)

    def flush_changes(self) -> list[Operation]:
        changes, self.changes = self.changes, []
        return changes


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _documents(works: Sequence[_Work]) -> list[tuple[str, str]]:
    return [w.document for w in works]


def _conditional_deletes(mutation: Mutation) -> bool:
    return mutation.deletes_if_unreferenced and bool(mutation.node_deletes or mutation.edge_deletes)


def _guarded_mutations(uow: UnitOfWork, to_write: Sequence[_Work]) -> list[Mutation]:
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


_LEAVES_THE_DLQ = (kafka_headers.DLQ_REPLAY, kafka_headers.RELEASED)


def stray_copy(operation: Operation, message: PlanMessage) -> bool:
    """A copy of a DEAD_LETTERED operation's plan that is neither a DLQ replay nor the release of
    a follower: a stray tier copy, a resend. A plan leaves the DLQ only by those two paths, which
    update its entry; any other copy would take it out behind the operator's back."""
    if operation.stage is not Stage.DEAD_LETTERED:
        return False
    return all(kafka_headers.header_value(message.headers, h) is None for h in _LEAVES_THE_DLQ)


class PlanApplier:
    def __init__(
        self,
        store: OperationStore,
        graph: GraphWriter,
        *,
        ladder: Ladder,
        worker_id: str,
        clock: Clock = _utc_now,
    ) -> None:
        self._store = store
        self._graph = graph
        self._plans_topic = ladder.plans_topic
        self._dlq_topic = ladder.dlq_topic
        self._max_message_bytes = ladder.max_message_bytes
        self._clock = clock
        self._router = FailureRouter(ladder, worker_id=worker_id, clock=clock)
        self._probes: dict[str, Callable[[], None]] = {
            "postgres": store.probe,
            "neo4j": graph.probe,
        }

    @property
    def dependencies(self) -> tuple[str, ...]:
        """The services this applier writes to, by the names their errors carry."""
        return tuple(self._probes)

    def probe(self, dependency: str) -> None:
        """Raise unless ``dependency`` answers a trivial transaction."""
        self._probes[dependency]()

    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> Mapping[tuple[str, str], bytes]:
        """The claim-checked plans of these (operation id, fingerprint) that are stored."""
        return self._store.plan_claims(keys)

    def apply(
        self, messages: Sequence[PlanMessage], *, in_place_exhausted: bool = False
    ) -> dict[Position, Outcome]:
        """Apply a batch; return each message's durable outcome keyed by its position.

        Raises when the policy says to retry the batch in place (nothing new is durable for the
        messages it did not report). ``in_place_exhausted``: the caller has retried this batch
        as often as the policy allows for CONTENTION and UNCERTAIN failures; now they split it.
        """
        outcomes: dict[Position, Outcome] = {}
        poison = [m for m in messages if m.plan is None]
        if poison:
            self._dead_letter_poison(poison, outcomes)
        plans = [m for m in messages if m.plan is not None]
        if plans:
            self._apply_isolating(plans, outcomes, in_place_exhausted)
        return outcomes

    # -- isolation -------------------------------------------------------------------------

    def _apply_isolating(
        self,
        batch: list[PlanMessage],
        outcomes: dict[Position, Outcome],
        in_place_exhausted: bool,
    ) -> None:
        try:
            outcomes.update(self._apply_steps(batch))
        except Exception as exc:
            code = classify(exc)
            if batch_action(code, in_place_exhausted=in_place_exhausted) is not BatchAction.SPLIT:
                raise
            if len(batch) > 1:
                middle = len(batch) // 2
                log.info("batch of %d failed with %s: splitting to isolate", len(batch), code)
                self._apply_isolating(batch[:middle], outcomes, in_place_exhausted)
                self._apply_isolating(batch[middle:], outcomes, in_place_exhausted)
                return
            action = lone_plan_action(code)
            if action is LonePlanAction.RETRY_IN_PLACE:
                raise
            if action is LonePlanAction.PROBE_THEN_FAIL:
                self._probe_dependencies(batch[0], exc)
            self._fail(batch[0], exc, outcomes)

    def _probe_dependencies(self, message: PlanMessage, cause: BaseException) -> None:
        """Raise DependencyUnhealthy unless PostgreSQL and Neo4j both answer a probe."""
        for name, probe in self._probes.items():
            try:
                probe()
            except Exception as exc:
                raise DependencyUnhealthy(
                    f"{message.context()} failed alone with {classify(cause)} and {name} fails "
                    f"a probe too ({error_info(exc).message}): blaming the service, not the plan"
                ) from exc

    def _fail(
        self,
        message: PlanMessage,
        exc: BaseException,
        outcomes: dict[Position, Outcome],
    ) -> None:
        """A plan failed alone: route it to the next retry tier or the DLQ (``routing``)."""
        plan = message.plan
        assert plan is not None
        with self._store.unit_of_work() as uow:
            uow.lock_documents([(plan.space, plan.document_id)])
            operation = uow.lock_operations([plan.operation_id]).get(plan.operation_id)
            owned = operation if operation and not binding_mismatch(operation, plan) else None
            kind = self._router.route(uow, Failure(message, error_info(exc), owned))
        outcomes[message.position] = _OUTCOME_OF_ROUTE[kind]

    def _dead_letter_poison(
        self, messages: Sequence[PlanMessage], outcomes: dict[Position, Outcome]
    ) -> None:
        """Messages that never decoded go to the DLQ at once, raw bytes kept."""
        with self._store.unit_of_work() as uow:
            for message in messages:
                assert message.error is not None
                failure = Failure(message, error_info(message.error), None)
                outcomes[message.position] = _OUTCOME_OF_ROUTE[self._router.route(uow, failure)]

    # -- the three steps -------------------------------------------------------------------

    def _apply_steps(self, batch: list[PlanMessage]) -> dict[Position, Outcome]:
        outcomes: dict[Position, Outcome] = {}
        with self._store.unit_of_work() as uow:
            admitted = self._admit(uow, batch, outcomes)
        self._write_graph(admitted)
        with self._store.unit_of_work() as uow:
            self._commit_state(uow, admitted, outcomes)
        return outcomes

    def _admit(
        self,
        uow: UnitOfWork,
        batch: list[PlanMessage],
        outcomes: dict[Position, Outcome],
    ) -> list[_Work]:
        now = self._clock()
        plans = [(m, m.plan) for m in batch if m.plan is not None]
        uow.lock_documents([(p.space, p.document_id) for _, p in plans])
        plans = self._without_routed(uow, plans, outcomes)
        uow.insert_operations(
            [
                NewOperation(
                    Operation.prepared(
                        operation_id=p.operation_id,
                        space=p.space,
                        document_id=p.document_id,
                        expected_revision=p.expected_revision,
                        fingerprint=p.fingerprint,
                        at=now,
                    ),
                    m.value or b"",
                    kafka_headers.work_headers(m.headers),
                    journey_start(m),
                )
                for m, p in plans
            ]
        )
        operations = uow.lock_operations([p.operation_id for _, p in plans])
        revisions = uow.document_revisions([(p.space, p.document_id) for _, p in plans])
        decided = [
            (m, p, decide(operations[p.operation_id], p, revisions.get((p.space, p.document_id))))
            for m, p in plans
        ]
        parked_on = [p.base_operation_id for _, p, a in decided if a.verdict is Verdict.PARK]
        bases = uow.lock_operations([b for b in parked_on if b is not None]) if parked_on else {}
        admitted: list[_Work] = []
        repaired = []
        for message, plan, decision in decided:
            work = _Work(message, plan, operations[plan.operation_id], [])
            base = bases.get(plan.base_operation_id or "")
            admission = unless_orphaned(decision, work.operation.stage, plan, base)
            verdict = admission.verdict
            if verdict is Verdict.REJECT:  # the operation is another plan's: not this one's to move
                assert admission.reason is not None
                kind = self._router.route(uow, Failure(message, admission.reason, None))
                outcomes[message.position] = _OUTCOME_OF_ROUTE[kind]
                continue
            if stray_copy(work.operation, message):
                log.warning(
                    "%s: operation is DEAD_LETTERED (%s) and this copy is no DLQ replay or "
                    "release: dropped (`graph-ingest dlq replay` takes it out of the DLQ)",
                    message.context(),
                    work.operation.dlq_id,
                )
                outcomes[message.position] = Outcome.DROPPED
                continue
            if verdict is Verdict.CONFLICT and admission.reason is not None:
                log.warning("%s conflict: %s", message.context(), admission.reason.message)
            work.move(*admission.path, at=now, reason=admission.reason)
            if verdict is Verdict.REPAIR:
                repaired.append(plan.next_state.model_copy(update={"committed_at": now}))
            if verdict in _OUTCOME_OF_VERDICT:
                outcomes[message.position] = _OUTCOME_OF_VERDICT[verdict]
            admitted.append(work)
        uow.save_operations([op for w in admitted for op in w.flush_changes()])
        self._conflict_orphans(
            uow, [w.plan for w in admitted if w.operation.stage is Stage.CONFLICT], now
        )
        if repaired:
            uow.ensure_history(repaired)
        self._follow_dead_lettered(uow, admitted, revisions, outcomes, now)
        return [w for w in admitted if w.message.position not in outcomes]

    def _without_routed(
        self,
        uow: UnitOfWork,
        plans: list[tuple[PlanMessage, IngestionPlan]],
        outcomes: dict[Position, Outcome],
    ) -> list[tuple[PlanMessage, IngestionPlan]]:
        """Drop messages whose failure was routed already (redelivered after a crash before their
        offset commit): their tier copy or DLQ entry carries them on, so applying them now would
        retry them before their delay."""
        routed = uow.routed_sources([m.position for m, _ in plans])
        for message, _ in plans:
            if (routed_to := routed.get(message.position)) is not None:
                log.info(
                    "%s was routed before (%s): not applied again", message.context(), routed_to
                )
                outcomes[message.position] = _OUTCOME_OF_ROUTE[RouteKind(routed_to)]
        return [(m, p) for m, p in plans if m.position not in routed]

    def _follow_dead_lettered(
        self,
        uow: UnitOfWork,
        admitted: list[_Work],
        revisions: dict[tuple[str, str], CommittedRevision],
        outcomes: dict[Position, Outcome],
        now: datetime,
    ) -> None:
        """A plan parked behind a version that is in the DLQ follows it there at once, as the
        plans parked before it went there did: it cannot apply before that one is replayed. One
        parked behind a version whose entry was purged would wait forever: it is a CONFLICT, so
        that the planner replans the document on its committed state."""
        parked = [w for w in admitted if outcomes.get(w.message.position) is Outcome.PARKED]
        if not parked:
            return
        keys = [
            (
                w.plan.space,
                w.plan.document_id,
                r.revision if (r := revisions.get(w.document)) else 0,
            )
            for w in parked
        ]
        blocking = uow.dead_lettered_at(keys)
        purged = uow.purged_leaders_at(keys)
        for work in parked:
            leader = blocking.get(work.document)
            gone = purged.get(work.document)
            if leader is not None and work.message.value is not None:
                follower = Follower(work.operation, work.message.value, work.message)
                self._router.follow(uow, leader, [follower], now)
                outcomes[work.message.position] = Outcome.DEAD_LETTERED
            elif leader is None and gone is not None:
                reason = leader_purged(gone)
                log.warning("%s conflict: %s", work.message.context(), reason.message)
                work.move(Stage.CONFLICT, at=now, reason=reason)
                uow.save_operations(work.flush_changes())
                outcomes[work.message.position] = Outcome.CONFLICT

    def _write_graph(self, admitted: list[_Work]) -> None:
        """Registrations, the graph write and GRAPH_APPLIED, fenced by the document locks."""
        to_write = [w for w in admitted if w.operation.stage is Stage.PREPARED]
        if not to_write:
            return
        documents = _documents(to_write)
        with self._store.unit_of_work() as uow:
            uow.lock_documents(documents)
            revisions = uow.document_revisions(documents)
            moved = [w for w in to_write if not applies_onto(w.plan, revisions.get(w.document))]
            if moved:
                first = moved[0]
                at = revisions.get(first.document)
                raise DocumentMovedOn(
                    f"{first.message.context()}: document {first.plan.key} is at revision "
                    f"{at.revision if at else 0} ({at.operation_id if at else 'no state'}), the "
                    f"plan expects {first.plan.expected_revision} "
                    f"({first.plan.base_operation_id or 'no state'}); another worker moved it on "
                    f"({len(moved)} plan(s) of the batch): nothing written, admitting again"
                )
            mutations = _guarded_mutations(uow, to_write)
            uow.register_entities([r for w in to_write for r in w.plan.registrations])
            self._graph.apply(
                [
                    (w.plan.graph, m)
                    for w, m in zip(to_write, mutations, strict=True)
                    if not m.is_empty
                ]
            )
            now = self._clock()
            for work in to_write:
                work.move(Stage.GRAPH_APPLIED, at=now)
            uow.save_operations([op for w in to_write for op in w.flush_changes()])

    def _commit_state(
        self,
        uow: UnitOfWork,
        admitted: list[_Work],
        outcomes: dict[Position, Outcome],
    ) -> None:
        now = self._clock()
        to_commit = [w for w in admitted if w.operation.stage is Stage.GRAPH_APPLIED]
        uow.lock_documents(_documents(to_commit))
        failed_cas = uow.commit_document_states(
            [
                w.plan.next_state.model_copy(update={"committed_at": now})
                for w in to_commit
                if w.plan.changes_state
            ]
        ) | self._moved_under_no_ops(uow, to_commit)
        committed = []
        for work in to_commit:
            if work.document in failed_cas:
                reason = conflict_reason(None, work.plan.expected_revision)
                log.warning("%s conflict: %s", work.message.context(), reason.message)
                work.move(Stage.CONFLICT, at=now, reason=reason)
                outcomes[work.message.position] = Outcome.CONFLICT
            else:
                work.move(Stage.STATE_COMMITTED, at=now)
                committed.append(work)
        for work in admitted:
            if work.operation.stage is Stage.STATE_COMMITTED:
                work.move(Stage.COMPLETED, at=now)
                outcomes[work.message.position] = Outcome.COMPLETED
        uow.save_operations([op for w in admitted for op in w.flush_changes()])
        self._conflict_orphans(uow, [w.plan for w in to_commit if w.document in failed_cas], now)
        self._release_parked(uow, [w.plan for w in committed if w.plan.changes_state])

    @staticmethod
    def _conflict_orphans(uow: UnitOfWork, conflicted: list[IngestionPlan], now: datetime) -> None:
        """Plans parked on the planned state of a plan that conflicted (directly, or through
        other parked plans) wait for a state that will never be committed: they conflict too,
        so that the document's newest request is replanned on the committed state."""
        while conflicted := [p for p in conflicted if p.changes_state]:
            dead = {p.operation_id for p in conflicted}
            waiting = uow.parked_behind(
                [(p.space, p.document_id, p.next_state.revision) for p in conflicted]
            )
            orphans = [
                (stored.operation, plan)
                for stored in waiting
                if stored.operation.stage is Stage.PARKED
                and (plan := decode_plan(stored.plan_bytes)).base_operation_id in dead
            ]
            uow.save_operations(
                [op.transition(Stage.CONFLICT, now, orphan_reason(plan)) for op, plan in orphans]
            )
            conflicted = [plan for _, plan in orphans]

    @staticmethod
    def _moved_under_no_ops(uow: UnitOfWork, to_commit: list[_Work]) -> set[tuple[str, str]]:
        """Documents whose NO_OP no longer sits on its base: a NO_OP commits no state (nothing
        to compare and set), so its base is checked here, under the document locks."""
        no_ops = [w for w in to_commit if not w.plan.changes_state]
        if not no_ops:
            return set()
        revisions = uow.document_revisions(_documents(no_ops))
        return {w.document for w in no_ops if not applies_onto(w.plan, revisions.get(w.document))}

    def _release_parked(self, uow: UnitOfWork, committed: list[IngestionPlan]) -> None:
        """Re-publish plans that were waiting for these revisions; they re-enter the applier.
        Those that had followed their predecessor to the DLQ leave it (status REPLAYED)."""
        waiting = uow.parked_behind(
            [(p.space, p.document_id, p.next_state.revision) for p in committed]
        )
        if not waiting:
            return
        followers = uow.dlq_entries(
            [
                w.operation.dlq_id
                for w in waiting
                if w.operation.stage is Stage.DEAD_LETTERED and w.operation.dlq_id
            ]
        )
        released = [
            with_status(entry, DlqStatus.REPLAYED, f"released: {entry.parked_behind} completed")
            for entry in followers.values()
        ]
        resent = [
            sized_plan_message(
                decode_plan(w.plan_bytes),
                self._plans_topic,
                value=w.plan_bytes,
                max_bytes=self._max_message_bytes,
                headers={**w.work_headers, kafka_headers.RELEASED: "parked"},
            )
            for w in waiting
        ]
        uow.put_dlq_entries(released)
        uow.put_plan_claims([claim for _, claim in resent if claim is not None])
        uow.enqueue(
            [
                *(dlq_message(self._dlq_topic, entry) for entry in released),
                *(message for message, _ in resent),
            ]
        )
