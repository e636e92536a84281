"""Resume and recovery (DESIGN.md §5): re-publish the stored frozen plan of an operation that did
not finish, so that the applier's admission takes it up again from its stage.

Nothing is re-planned and nothing is re-encoded: the message carries the very bytes the applier
stored when it first admitted the plan, under the plan's key and headers (``plan_message``), with
the work headers admission kept (``traceparent``, ``submission_id``) and ``resumed:
resume|recover``. Admission does the rest: FAILED and PARKED go back to PREPARED, GRAPH_APPLIED
goes on at the state commit, an operation that has meanwhile COMPLETED is a duplicate.
Re-publishing is therefore always safe; the leases only keep it from happening twice. A
DEAD_LETTERED operation is not resumed here: it leaves the DLQ only by a replay of its entry
(``dlq.replayer``), which records it there (``graph-ingest resume`` takes that path).

``recover`` claims a bounded batch of stranded operations, oldest first, each under a lease
(``RecoveryStore``; a PARKED one only once its predecessor has committed, i.e. its release was
lost), and re-publishes them one by one: a plan that cannot be re-published is
reported and the others go on; a service that is down ends the run (the rest are released,
not attempted). It also reports the PARKED operations whose predecessor is gone (no operation
that would commit the revision they wait for is on its way, e.g. its DLQ entry was purged):
re-publishing them would only park them again; they need a person.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.producer import BatchProducer
from graph_ingest.resilience.classify import error_info
from graph_ingest.resilience.policy import FailureScope, scope_of
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.schemas.plan_messages import sized_plan_message
from graph_ingest.settings.recovery import RecoverySettings
from graph_ingest.store.recovery import RecoveryClaim, RecoveryStore

log = logging.getLogger(__name__)

RESUMABLE_STAGES = frozenset(
    stage for stage in Stage if not stage.is_terminal and stage is not Stage.DEAD_LETTERED
)
"""What ``resume`` and ``recover`` re-publish: every stage an operation can still leave, but
DEAD_LETTERED. A dead-lettered operation waits for a person and leaves the DLQ by a replay of its
entry, which updates the entry (the applier drops any other copy of its plan)."""

RECOVERABLE_STAGES = RESUMABLE_STAGES
"""What ``recover`` scans for: the same stages."""


class OperationNotFound(GraphIngestError):
    code = StatusCode.NOT_FOUND


class NotResumable(GraphIngestError):
    """The operation is finished (COMPLETED), its plan is stale (CONFLICT), or it is in the DLQ
    (DEAD_LETTERED: replay its entry)."""

    code = StatusCode.FAILED_PRECONDITION


class StoredPlanUnusable(GraphIngestError):
    """The stored frozen plan cannot be re-published as it is (undecodable, tampered, or bound to
    another operation)."""

    code = StatusCode.DATA_LOSS


def refusal(operation: Operation) -> str | None:
    """Why ``operation`` cannot be resumed, or None if it can."""
    if operation.stage is Stage.COMPLETED:
        return f"operation {operation.operation_id} is COMPLETED: there is nothing to resume"
    if operation.stage is Stage.CONFLICT:
        return (
            f"operation {operation.operation_id} is CONFLICT: the plan is stale (document "
            f"{operation.space}/{operation.document_id} moved past revision "
            f"{operation.expected_revision}), a replan is needed"
        )
    if operation.stage is Stage.DEAD_LETTERED:
        return (
            f"operation {operation.operation_id} is DEAD_LETTERED: it leaves the DLQ by a replay "
            f"of its entry (`graph-ingest dlq replay {operation.dlq_id}`)"
        )
    if operation.stage not in RESUMABLE_STAGES:  # pragma: no cover - a stage added later
        return f"operation {operation.operation_id} is {operation.stage}: not resumable"
    return None


def resume_message(
    claim: RecoveryClaim, topic: str, *, via: str, max_bytes: int
) -> tuple[OutboxMessage, PlanClaim | None]:
    """The plans-topic message that resumes ``claim``'s operation: its stored bytes, unchanged
    (or a claim-check reference to them past ``max_bytes``, with the claim to store first)."""
    operation = claim.operation
    try:
        plan = decode_plan(claim.plan_bytes)
    except GraphIngestError as exc:
        raise StoredPlanUnusable(
            f"the stored plan of operation {operation.operation_id} cannot be decoded: {exc}"
        ) from exc
    bound = (operation.operation_id, operation.fingerprint, operation.space, operation.document_id)
    found = (plan.operation_id, plan.fingerprint, plan.space, plan.document_id)
    if found != bound:
        raise StoredPlanUnusable(
            f"the stored plan of operation {operation.operation_id} is plan {plan.operation_id} "
            f"({plan.fingerprint}) of {plan.space}/{plan.document_id}, not the one the operation "
            f"is bound to ({operation.fingerprint} of {operation.space}/{operation.document_id})"
        )
    try:
        return sized_plan_message(
            plan,
            topic,
            value=claim.plan_bytes,
            max_bytes=max_bytes,
            headers={**claim.work_headers, kafka_headers.RESUMED: via},
        )
    except GraphIngestError as exc:  # the fingerprint no longer matches the content
        raise StoredPlanUnusable(str(exc)) from exc


class Action(StrEnum):
    RESUMED = "resumed"
    FAILED = "failed"  # this plan could not be re-published; the others went on
    SKIPPED = "skipped"  # not attempted: a service was down, or the lease ran short


@dataclass(frozen=True, slots=True)
class Recovered:
    """What was done with one claimed operation."""

    operation: Operation
    action: Action
    claims: int
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    claimed_by: str
    older_than_s: float
    limit: int
    lease_s: float
    items: tuple[Recovered, ...]
    stranded: tuple[Operation, ...] = ()
    """PARKED operations whose predecessor is gone: nothing will release them (reported only)."""

    def count(self, action: Action) -> int:
        return sum(item.action is action for item in self.items)

    @property
    def service_unavailable(self) -> bool:
        """Some operation was not resumed because a service (not its plan) failed."""
        return any(
            item.error is not None and is_service_failure(item.error.code) for item in self.items
        )


def is_service_failure(code: StatusCode) -> bool:
    """Kafka or PostgreSQL down or refusing us, or an acknowledgement that never came."""
    return scope_of(code) is FailureScope.DEPENDENCY or code is StatusCode.DEADLINE_EXCEEDED


def new_claimer(via: str) -> str:
    """A name for this run, unique across hosts and runs: ``via@host:pid:random``."""
    return f"{via}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Recoverer:
    """Re-publishes stored plans through ``producer`` to ``topic`` (a plan past
    ``max_message_bytes`` as a claim-check reference); owns neither client."""

    def __init__(
        self,
        store: RecoveryStore,
        producer: BatchProducer,
        topic: str,
        settings: RecoverySettings,
        *,
        max_message_bytes: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._producer = producer
        self._topic = topic
        self._max_message_bytes = max_message_bytes
        self._settings = settings
        self._monotonic = monotonic

    def resume(self, operation: Operation) -> RecoveryClaim:
        """Re-publish ``operation``'s plan now, taking its lease over (an operator's decision
        overrides a recoverer's). Raises NotResumable, OperationNotFound, StoredPlanUnusable, or
        the error of the service that failed."""
        reason = refusal(operation)
        if reason:
            raise NotResumable(reason)
        claimer = new_claimer("resume")
        claim = self._store.claim_operation(
            operation.operation_id,
            stages=RESUMABLE_STAGES,
            claimer=claimer,
            lease_s=self._settings.lease_s,
        )
        if claim is None:  # gone, or finished since we read it
            raise OperationNotFound(f"operation {operation.operation_id} is no longer resumable")
        try:
            self._publish(claim, via="resume")
        except BaseException:
            self._release(claim)
            raise
        return claim

    def recover(self, *, older_than_s: float, limit: int) -> RecoveryReport:
        """Claim up to ``limit`` stranded operations (oldest first) and re-publish each."""
        settings = self._settings
        claimer = new_claimer("recover")
        # The database starts the lease after this instant: a deadline counted from here ends
        # before the lease does, whatever the clocks of the two machines say.
        lease_ends = self._monotonic() + settings.lease_s
        claims = self._store.claim_for_recovery(
            stages=RECOVERABLE_STAGES,
            older_than_s=older_than_s,
            limit=limit,
            claimer=claimer,
            lease_s=settings.lease_s,
        )
        items: list[Recovered] = []
        stopped: ErrorInfo | None = None
        for claim in claims:
            if stopped is None and self._monotonic() + settings.publish_timeout_s >= lease_ends:
                stopped = ErrorInfo(  # ABORTED: the next run may well succeed
                    code=StatusCode.ABORTED,
                    error_class="LeaseRunningOut",
                    message="the lease would end before this plan is acknowledged: not attempted",
                )
            if stopped is not None:
                self._release(claim)
                items.append(_recovered(claim, Action.SKIPPED, stopped))
                continue
            try:
                self._publish(claim, via="recover")
            except Exception as exc:
                info = error_info(exc)
                self._release(claim)
                items.append(_recovered(claim, Action.FAILED, info))
                log.error(
                    "recover op=%s stage=%s: %s %s",
                    claim.operation.operation_id,
                    claim.operation.stage,
                    info.code,
                    info.message,
                )
                if is_service_failure(info.code):
                    stopped = ErrorInfo(
                        code=info.code,
                        error_class="NotAttempted",
                        message=f"not attempted after a service failure: {info.message}",
                    )
                continue
            items.append(_recovered(claim, Action.RESUMED))
        stranded = self._store.stranded_parked(older_than_s=older_than_s, limit=limit)
        return RecoveryReport(
            claimed_by=claimer,
            older_than_s=older_than_s,
            limit=limit,
            lease_s=settings.lease_s,
            items=tuple(items),
            stranded=tuple(stranded),
        )

    def _publish(self, claim: RecoveryClaim, *, via: str) -> None:
        message, plan_claim = resume_message(
            claim, self._topic, via=via, max_bytes=self._max_message_bytes
        )
        if plan_claim is not None:
            self._store.put_plan_claims([plan_claim])
        self._producer.start()  # idempotent
        self._producer.produce_batch([message], timeout_s=self._settings.publish_timeout_s)
        log.info(
            "%s re-published op=%s stage=%s key=%s (%s)",
            self._topic,
            claim.operation.operation_id,
            claim.operation.stage,
            message.key.decode() if message.key else None,
            via,
        )

    def _release(self, claim: RecoveryClaim) -> None:
        """Let the next run try again at once; if even that fails, the lease just runs out."""
        try:
            self._store.release_recovery_claim(claim.operation.operation_id, claim.claimed_by)
        except GraphIngestError as exc:
            log.warning(
                "recover op=%s: could not release the lease (%s); it expires at %s",
                claim.operation.operation_id,
                exc,
                claim.lease_until.isoformat(),
            )


def _recovered(claim: RecoveryClaim, action: Action, error: ErrorInfo | None = None) -> Recovered:
    return Recovered(operation=claim.operation, action=action, claims=claim.claims, error=error)


__all__ = [
    "RECOVERABLE_STAGES",
    "RESUMABLE_STAGES",
    "Action",
    "NotResumable",
    "OperationNotFound",
    "Recovered",
    "Recoverer",
    "RecoveryReport",
    "StoredPlanUnusable",
    "is_service_failure",
    "new_claimer",
    "refusal",
    "resume_message",
]
