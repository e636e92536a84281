"""The apply algorithm (DESIGN.md §4) over a batch of plans: three PostgreSQL transactions and
one Neo4j transaction per batch, whatever its size.

1. admit: create-or-verify every operation with its frozen plan, detect duplicates and already
   committed plans, check revisions (equal: go on; behind: CONFLICT; ahead: PARKED);
2. graph: write the mutations of every plan still before GRAPH_APPLIED in one graph transaction,
   then record GRAPH_APPLIED;
3. commit: state compare-and-set, history, fact sources, registry, STATE_COMMITTED and COMPLETED,
   and release plans parked behind the new revisions — one transaction.

Every stage change goes to the outbox in the transaction that makes it. A step that fails for a
reason that will not go away is isolated by splitting the batch until the one plan that causes it
is alone; that plan is recorded as failed/rejected and the others go on. Transient failures
propagate: the caller retries the whole batch, and every step is idempotent on re-entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from graph_ingest.consumers.messages import PlanMessage
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import LEGAL_TRANSITIONS, Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.base import GraphWriter
from graph_ingest.resilience.classify import classify, error_info
from graph_ingest.store.base import (
    NewOperation,
    OperationStore,
    OutboxMessage,
    RejectedMessage,
    UnitOfWork,
)

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


class Outcome(StrEnum):
    COMPLETED = "COMPLETED"
    DUPLICATE = "DUPLICATE"
    CONFLICT = "CONFLICT"
    PARKED = "PARKED"
    REJECTED = "REJECTED"
    FAILED = "FAILED"


# The legal path from each stage back to PREPARED (retry, release, replay).
_TO_PREPARED: dict[Stage, tuple[Stage, ...]] = {
    Stage.PREPARED: (),
    Stage.FAILED: (Stage.PREPARED,),
    Stage.PARKED: (Stage.PREPARED,),
    Stage.DEAD_LETTERED: (Stage.PREPARED,),
}


@dataclass
class _Work:
    """One plan on its way through the steps, with every snapshot it passed through."""

    message: PlanMessage
    plan: IngestionPlan
    operation: Operation
    changes: list[Operation]

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


class PlanApplier:
    def __init__(
        self,
        store: OperationStore,
        graph: GraphWriter,
        *,
        plans_topic: str,
        clock: Clock = _utc_now,
    ) -> None:
        self._store = store
        self._graph = graph
        self._plans_topic = plans_topic
        self._clock = clock

    def apply(
        self, messages: Sequence[PlanMessage], *, internal_is_permanent: bool = False
    ) -> dict[tuple[str, int, int], Outcome]:
        """Apply a batch; return each message's durable outcome keyed by its position.

        Raises the first transient error (nothing new is durable for the messages it did not
        report); ``internal_is_permanent`` makes INTERNAL errors isolate and fail the plan
        instead, once the caller has retried them enough.
        """
        outcomes: dict[tuple[str, int, int], Outcome] = {}
        poison = [m for m in messages if m.plan is None]
        if poison:
            self._reject(poison, outcomes)
        plans = [m for m in messages if m.plan is not None]
        if plans:
            self._apply_isolating(plans, outcomes, internal_is_permanent)
        return outcomes

    # -- isolation -------------------------------------------------------------------------

    def _apply_isolating(
        self,
        batch: list[PlanMessage],
        outcomes: dict[tuple[str, int, int], Outcome],
        internal_is_permanent: bool,
    ) -> None:
        try:
            outcomes.update(self._apply_steps(batch))
        except Exception as exc:
            code = classify(exc)
            if code.is_transient and not (internal_is_permanent and code is StatusCode.INTERNAL):
                raise
            if len(batch) == 1:
                self._fail(batch[0], exc, outcomes)
                return
            middle = len(batch) // 2
            log.info("batch of %d failed with %s: splitting to isolate", len(batch), code)
            self._apply_isolating(batch[:middle], outcomes, internal_is_permanent)
            self._apply_isolating(batch[middle:], outcomes, internal_is_permanent)

    def _fail(
        self,
        message: PlanMessage,
        exc: BaseException,
        outcomes: dict[tuple[str, int, int], Outcome],
    ) -> None:
        """A plan that cannot apply: record the error on its operation and keep its bytes."""
        assert message.plan is not None
        info = error_info(exc)
        log.error("%s cannot apply: %s %s", message.context(), info.code, info.message)
        now = self._clock()
        with self._store.unit_of_work() as uow:
            operation = uow.lock_operations([message.plan.operation_id]).get(
                message.plan.operation_id
            )
            if operation is not None and not operation.stage.is_terminal:
                if Stage.FAILED in LEGAL_TRANSITIONS[operation.stage]:
                    operation = operation.transition(Stage.FAILED, now, info)
                else:
                    operation = operation.with_error(info, now)
                uow.save_operations([operation])
            uow.record_rejected([_rejected(message, info)])
        outcomes[message.position] = Outcome.FAILED

    def _reject(
        self, messages: Sequence[PlanMessage], outcomes: dict[tuple[str, int, int], Outcome]
    ) -> None:
        rejected = []
        for message in messages:
            assert message.error is not None
            info = error_info(message.error)
            log.error("%s rejected: %s %s", message.context(), info.code, info.message)
            rejected.append(_rejected(message, info))
            outcomes[message.position] = Outcome.REJECTED
        with self._store.unit_of_work() as uow:
            uow.record_rejected(rejected)

    # -- the three steps -------------------------------------------------------------------

    def _apply_steps(self, batch: list[PlanMessage]) -> dict[tuple[str, int, int], Outcome]:
        outcomes: dict[tuple[str, int, int], Outcome] = {}
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
        outcomes: dict[tuple[str, int, int], Outcome],
    ) -> list[_Work]:
        now = self._clock()
        plans = [(m, m.plan) for m in batch if m.plan is not None]
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
                )
                for m, p in plans
            ]
        )
        operations = uow.lock_operations([p.operation_id for _, p in plans])
        revisions = uow.document_revisions([(p.space, p.document_id) for _, p in plans])
        admitted: list[_Work] = []
        rejected: list[RejectedMessage] = []
        repaired = []
        for message, plan in plans:
            work = _Work(message, plan, operations[plan.operation_id], [])
            mismatch = _binding_mismatch(work.operation, plan)
            if mismatch:
                info = ErrorInfo(
                    code=StatusCode.ALREADY_EXISTS,
                    error_class="OperationBindingMismatch",
                    message=mismatch,
                )
                log.error("%s rejected: %s", message.context(), mismatch)
                rejected.append(_rejected(message, info))
                outcomes[message.position] = Outcome.REJECTED
                continue
            stage = work.operation.stage
            committed = revisions.get((plan.space, plan.document_id))
            current = committed.revision if committed else 0
            if stage is Stage.COMPLETED:
                outcomes[message.position] = Outcome.DUPLICATE
            elif stage is Stage.CONFLICT:
                outcomes[message.position] = Outcome.CONFLICT
            elif committed is not None and committed.operation_id == plan.operation_id:
                # The state commit happened; only the operation log is behind: repair it.
                work.move(*_path_to_completed(stage), at=now)
                repaired.append(plan.next_state.model_copy(update={"committed_at": now}))
                admitted.append(work)
                outcomes[message.position] = Outcome.DUPLICATE
            elif current > plan.expected_revision:
                reason = _conflict(current, plan.expected_revision)
                log.warning("%s conflict: %s", message.context(), reason.message)
                work.move(*_path_to(stage, Stage.CONFLICT), at=now, reason=reason)
                admitted.append(work)
                outcomes[message.position] = Outcome.CONFLICT
            elif current < plan.expected_revision:
                if stage is not Stage.PARKED:
                    reason = ErrorInfo(
                        code=StatusCode.FAILED_PRECONDITION,
                        error_class="WaitingForEarlierRevision",
                        message=f"document at revision {current}, plan expects "
                        f"{plan.expected_revision}: parked until that revision commits",
                    )
                    work.move(*_path_to(stage, Stage.PARKED), at=now, reason=reason)
                admitted.append(work)
                outcomes[message.position] = Outcome.PARKED
            else:
                work.move(*_TO_PREPARED.get(stage, ()), at=now)
                admitted.append(work)
        uow.save_operations([op for w in admitted for op in w.flush_changes()])
        if repaired:
            uow.ensure_history(repaired)
        if rejected:
            uow.record_rejected(rejected)
        return [w for w in admitted if w.message.position not in outcomes]

    def _write_graph(self, admitted: list[_Work]) -> None:
        to_write = [w for w in admitted if w.operation.stage is Stage.PREPARED]
        if not to_write:
            return
        self._graph.apply(
            [(w.plan.graph, w.plan.mutation) for w in to_write if not w.plan.mutation.is_empty]
        )
        now = self._clock()
        for work in to_write:
            work.move(Stage.GRAPH_APPLIED, at=now)
        with self._store.unit_of_work() as uow:
            uow.save_operations([op for w in to_write for op in w.flush_changes()])

    def _commit_state(
        self,
        uow: UnitOfWork,
        admitted: list[_Work],
        outcomes: dict[tuple[str, int, int], Outcome],
    ) -> None:
        now = self._clock()
        to_commit = [w for w in admitted if w.operation.stage is Stage.GRAPH_APPLIED]
        failed_cas = uow.commit_document_states(
            [w.plan.next_state.model_copy(update={"committed_at": now}) for w in to_commit]
        )
        committed = []
        for work in to_commit:
            if (work.plan.space, work.plan.document_id) in failed_cas:
                reason = _conflict(None, work.plan.expected_revision)
                log.warning("%s conflict: %s", work.message.context(), reason.message)
                work.move(Stage.CONFLICT, at=now, reason=reason)
                outcomes[work.message.position] = Outcome.CONFLICT
            else:
                work.move(Stage.STATE_COMMITTED, at=now)
                committed.append(work)
        uow.register_entities([r for w in committed for r in w.plan.registrations])
        for work in admitted:
            if work.operation.stage is Stage.STATE_COMMITTED:
                work.move(Stage.COMPLETED, at=now)
                outcomes[work.message.position] = Outcome.COMPLETED
        uow.save_operations([op for w in admitted for op in w.flush_changes()])
        self._release_parked(uow, [w.plan for w in committed])

    def _release_parked(self, uow: UnitOfWork, committed: list[IngestionPlan]) -> None:
        """Re-publish plans that were waiting for these revisions; they re-enter the applier."""
        waiting = uow.parked_behind(
            [(p.space, p.document_id, p.next_state.revision) for p in committed]
        )
        if not waiting:
            return
        uow.enqueue(
            [
                OutboxMessage(
                    topic=self._plans_topic,
                    key=f"{op.space}/{op.document_id}".encode(),
                    value=plan_bytes,
                    headers={"operation_id": op.operation_id, "released": "parked"},
                    operation_id=op.operation_id,
                )
                for op, plan_bytes in waiting
            ]
        )


def _path_to(stage: Stage, target: Stage) -> tuple[Stage, ...]:
    """Shortest legal path to ``target``: directly, or by way of PREPARED."""
    if target in LEGAL_TRANSITIONS[stage]:
        return (target,)
    return (*_TO_PREPARED.get(stage, ()), target)


def _path_to_completed(stage: Stage) -> tuple[Stage, ...]:
    forward = (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED)
    if stage in forward:
        return forward[forward.index(stage) + 1 :]
    return (*_TO_PREPARED.get(stage, ()), *forward)


def _conflict(current: int | None, expected: int) -> ErrorInfo:
    at = "moved past" if current is None else f"at revision {current}, past"
    return ErrorInfo(
        code=StatusCode.FAILED_PRECONDITION,
        error_class="RevisionConflict",
        message=f"document {at} the plan's expected revision {expected}: "
        "the plan is stale, replan against the current state",
    )


def _binding_mismatch(operation: Operation, plan: IngestionPlan) -> str | None:
    bound = (
        operation.fingerprint,
        operation.space,
        operation.document_id,
        operation.expected_revision,
    )
    offered = (plan.fingerprint, plan.space, plan.document_id, plan.expected_revision)
    if bound == offered:
        return None
    return (
        f"operation {plan.operation_id} is bound to plan {operation.fingerprint} of "
        f"{operation.space}/{operation.document_id}@{operation.expected_revision}; refusing "
        f"{plan.fingerprint} of {plan.space}/{plan.document_id}@{plan.expected_revision}"
    )


def _rejected(message: PlanMessage, info: ErrorInfo) -> RejectedMessage:
    return RejectedMessage(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value,
        code=info.code,
        error_class=info.error_class,
        message=info.message,
        operation_id=message.plan.operation_id if message.plan else message.operation_id_header,
    )
