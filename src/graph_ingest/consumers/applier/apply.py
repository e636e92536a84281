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

This module admits and isolates; the graph step is ``graph_step``, the state step
``commit_step``, what happens to parked plans ``parked``, and routing ``routing``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum

from graph_ingest.consumers.applier.commit_step import commit_states
from graph_ingest.consumers.applier.followers import FollowerRouter
from graph_ingest.consumers.applier.graph_step import write_graph
from graph_ingest.consumers.applier.ladder import Ladder, journey_start
from graph_ingest.consumers.applier.parked import conflict_orphans
from graph_ingest.consumers.applier.route_log import RouteLog
from graph_ingest.consumers.applier.routing import Failure, FailureRouter
from graph_ingest.consumers.applier.work import PlanWork
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.admission import (
    Admission,
    Verdict,
    binding_mismatch,
    decide,
    unless_orphaned,
)
from graph_ingest.domain.errors import DependencyUnavailable
from graph_ingest.domain.operation import Operation, OutageWait
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.graph.base import GraphWriter
from graph_ingest.kafka.records import Position
from graph_ingest.resilience.classify import classify, error_info
from graph_ingest.resilience.policy import (
    BatchAction,
    LonePlanAction,
    RouteKind,
    batch_action,
    lone_plan_action,
)
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.store.base import OperationStore, UnitOfWork
from graph_ingest.store.operations import NewOperation

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


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


class DependencyUnhealthy(DependencyUnavailable):
    """A plan failed alone and a probe of the services failed too: the service is to blame."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _insert_prepared(
    uow: UnitOfWork, plans: Sequence[tuple[PlanMessage, IngestionPlan]], now: datetime
) -> None:
    """Create each plan's operation at PREPARED with its frozen plan (an existing one is kept:
    ``decide`` verifies it), and the headers and journey start every re-send carries."""
    uow.insert_operations([_new_operation(m, p, now) for m, p in plans])


def _new_operation(message: PlanMessage, plan: IngestionPlan, now: datetime) -> NewOperation:
    work_headers = kafka_headers.work_headers(message.headers)
    return NewOperation(
        Operation.prepared(
            operation_id=plan.operation_id,
            space=plan.space,
            document_id=plan.document_id,
            expected_revision=plan.expected_revision,
            fingerprint=plan.fingerprint,
            at=now,
            plan_kind=plan.kind,
            document_version=plan.document_version,
            submission_id=work_headers.get(kafka_headers.SUBMISSION_ID),
        ),
        message.value or b"",
        work_headers,
        journey_start(message),
    )


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
        self._ladder = ladder
        self._clock = clock
        self.routes = RouteLog()
        """The tier copies and DLQ entries the last ``apply`` wrote (``route_log``)."""
        self.step_seconds: dict[str, float] = {}
        """Seconds per step (``admit``, ``graph_write``, ``state_commit``) of the last ``apply``,
        summed over the parts of a split batch; steps of an attempt that raised are left out."""
        self._router = FailureRouter(ladder, worker_id=worker_id, clock=clock, routes=self.routes)
        self._followers = FollowerRouter(ladder, worker_id=worker_id, routes=self.routes)
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
        self,
        messages: Sequence[PlanMessage],
        *,
        in_place_exhausted: bool = False,
        waited: tuple[OutageWait, ...] = (),
    ) -> dict[Position, Outcome]:
        """Apply a batch; return each message's durable outcome keyed by its position.

        Raises when the policy says to retry the batch in place (nothing new is durable for the
        messages it did not report). ``in_place_exhausted``: the caller has retried this batch
        as often as the policy allows for CONTENTION and UNCERTAIN failures; now they split it.
        ``waited``: the outages the caller held this batch through; the next snapshot of each
        operation the batch moves records them.
        """
        self.routes.clear()
        self.step_seconds.clear()
        outcomes: dict[Position, Outcome] = {}
        poison = [m for m in messages if m.plan is None]
        if poison:
            self._dead_letter_poison(poison, outcomes)
        plans = [m for m in messages if m.plan is not None]
        if plans:
            self._apply_isolating(plans, outcomes, in_place_exhausted, waited)
        return outcomes

    # -- isolation -------------------------------------------------------------------------

    def _apply_isolating(
        self,
        batch: list[PlanMessage],
        outcomes: dict[Position, Outcome],
        in_place_exhausted: bool,
        waited: tuple[OutageWait, ...] = (),
    ) -> None:
        try:
            outcomes.update(self._apply_steps(batch, waited))
        except Exception as exc:
            code = classify(exc)
            if batch_action(code, in_place_exhausted=in_place_exhausted) is not BatchAction.SPLIT:
                raise
            if len(batch) > 1:
                middle = len(batch) // 2
                log.info("batch of %d failed with %s: splitting to isolate", len(batch), code)
                self._apply_isolating(batch[:middle], outcomes, in_place_exhausted, waited)
                self._apply_isolating(batch[middle:], outcomes, in_place_exhausted, waited)
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

    def _apply_steps(
        self, batch: list[PlanMessage], waited: tuple[OutageWait, ...]
    ) -> dict[Position, Outcome]:
        outcomes: dict[Position, Outcome] = {}
        started = time.monotonic()
        with self._store.unit_of_work() as uow:
            admitted = self._admit(uow, batch, outcomes, waited)
        admitted_at = time.monotonic()
        write_graph(self._store, self._graph, admitted, self._clock)
        written_at = time.monotonic()
        with self._store.unit_of_work() as uow:
            committed = commit_states(uow, admitted, self._clock(), self._ladder)
        self._timed(admit=admitted_at - started, graph_write=written_at - admitted_at)
        self._timed(state_commit=time.monotonic() - written_at)
        outcomes.update((w.message.position, Outcome.CONFLICT) for w in committed.conflicted)
        outcomes.update((w.message.position, Outcome.COMPLETED) for w in committed.completed)
        return outcomes

    def _timed(self, **steps: float) -> None:
        for step, seconds in steps.items():
            self.step_seconds[step] = self.step_seconds.get(step, 0.0) + seconds

    def _admit(
        self,
        uow: UnitOfWork,
        batch: list[PlanMessage],
        outcomes: dict[Position, Outcome],
        waited: tuple[OutageWait, ...],
    ) -> list[PlanWork]:
        """Create-or-verify every operation with its frozen plan and carry out what
        ``admission.decide`` says of it; return the plans that go on to the graph step. The
        outages ``waited`` out ride on each operation's next snapshot."""
        now = self._clock()
        plans = [(m, m.plan) for m in batch if m.plan is not None]
        uow.lock_documents([(p.space, p.document_id) for _, p in plans])
        plans = self._without_routed(uow, plans, outcomes)
        _insert_prepared(uow, plans, now)
        operations = uow.lock_operations([p.operation_id for _, p in plans])
        revisions = uow.document_revisions([(p.space, p.document_id) for _, p in plans])
        decided = [
            (m, p, decide(operations[p.operation_id], p, revisions.get((p.space, p.document_id))))
            for m, p in plans
        ]
        parked_on = [p.base_operation_id for _, p, a in decided if a.verdict is Verdict.PARK]
        bases = uow.lock_operations([b for b in parked_on if b is not None]) if parked_on else {}
        admitted: list[PlanWork] = []
        repaired = []
        for message, plan, decision in decided:
            work = PlanWork(message, plan, operations[plan.operation_id].having_waited(waited), [])
            base = bases.get(plan.base_operation_id or "")
            admission = unless_orphaned(decision, work.operation.stage, plan, base)
            if not self._carry_out(uow, work, admission, now, outcomes):
                continue
            if admission.verdict is Verdict.REPAIR:
                repaired.append(plan.next_state.model_copy(update={"committed_at": now}))
            admitted.append(work)
        uow.save_operations([op for w in admitted for op in w.flush_changes()])
        conflict_orphans(
            uow, [w.plan for w in admitted if w.operation.stage is Stage.CONFLICT], now
        )
        if repaired:
            uow.ensure_history(repaired)
        parked = [w for w in admitted if outcomes.get(w.message.position) is Outcome.PARKED]
        if parked:
            arrived = self._followers.follow_on_arrival(uow, parked, revisions, now)
            outcomes.update((w.message.position, Outcome.DEAD_LETTERED) for w in arrived.followed)
            outcomes.update((w.message.position, Outcome.CONFLICT) for w in arrived.conflicted)
        return [w for w in admitted if w.message.position not in outcomes]

    def _carry_out(
        self,
        uow: UnitOfWork,
        work: PlanWork,
        admission: Admission,
        now: datetime,
        outcomes: dict[Position, Outcome],
    ) -> bool:
        """Move the plan's operation along the admission's path; False when the plan is routed
        or dropped instead (it then takes no further step)."""
        message, verdict = work.message, admission.verdict
        if verdict is Verdict.REJECT:  # the operation is another plan's: not this one's to move
            assert admission.reason is not None
            kind = self._router.route(uow, Failure(message, admission.reason, None))
            outcomes[message.position] = _OUTCOME_OF_ROUTE[kind]
            return False
        if stray_copy(work.operation, message):
            log.warning(
                "%s: operation is DEAD_LETTERED (%s) and this copy is no DLQ replay or "
                "release: dropped (`graph-ingest dlq replay` takes it out of the DLQ)",
                message.context(),
                work.operation.dlq_id,
                extra=message.log_fields(),
            )
            outcomes[message.position] = Outcome.DROPPED
            return False
        if verdict is Verdict.CONFLICT and admission.reason is not None:
            log.warning(
                "%s conflict: %s",
                message.context(),
                admission.reason.message,
                extra=message.log_fields(),
            )
        work.move(*admission.path, at=now, reason=admission.reason)
        if verdict in _OUTCOME_OF_VERDICT:
            outcomes[message.position] = _OUTCOME_OF_VERDICT[verdict]
        return True

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
