"""Plans of a document parked behind a dead-lettered one follow it to the DLQ (DESIGN.md §5,
issue 6 item 4) — those parked before it went there, and those that arrive after: they cannot
apply before it does, and an operator reviewing the DLQ must see them. Each gets its own entry,
naming the leader it is parked behind; it is released again when the leader is replayed and
completes (``parked``). One that arrives behind a version whose entry was purged conflicts
instead: it would wait forever.

In the caller's PostgreSQL transaction, the followers' operations locked by it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from graph_ingest.consumers.applier.dead_letters import (
    attempt_records,
    dead_letter,
    failure_detail,
    record_failure,
)
from graph_ingest.consumers.applier.ladder import (
    Ladder,
    Origin,
    earlier_deliveries,
    first_failed,
    journey_start,
    known_origin,
)
from graph_ingest.consumers.applier.route_log import RouteLog
from graph_ingest.consumers.applier.work import PlanWork
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.dlq.entries import dlq_id_of_operation
from graph_ingest.dlq.purge import leader_purged
from graph_ingest.domain.dlq import DlqEnvelope
from graph_ingest.domain.ids import document_key
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.resilience.policy import TO_DLQ, RouteKind, retry_advice
from graph_ingest.schemas.messages import dlq_envelope
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.failures import FailureAttempt

log = logging.getLogger(__name__)


class Follower(NamedTuple):
    """A PARKED operation to dead-letter behind its leader, with its frozen plan bytes, and the
    message that delivered it when it follows on arrival (None for one parked before)."""

    operation: Operation
    plan_bytes: bytes
    delivered: PlanMessage | None = None


@dataclass
class Arrived:
    """What became of plans parked on arrival behind a dead-lettered or purged version."""

    followed: list[PlanWork] = field(default_factory=list)
    conflicted: list[PlanWork] = field(default_factory=list)


class FollowerRouter:
    def __init__(self, ladder: Ladder, *, worker_id: str, routes: RouteLog | None = None) -> None:
        self._ladder = ladder
        self._worker_id = worker_id
        self._routes = routes if routes is not None else RouteLog()

    def follow_on_arrival(
        self,
        uow: UnitOfWork,
        parked: Sequence[PlanWork],
        revisions: Mapping[tuple[str, str], CommittedRevision],
        now: datetime,
    ) -> Arrived:
        """A plan parked behind a version that is in the DLQ follows it there at once, as the
        plans parked before it went there did: it cannot apply before that one is replayed. One
        parked behind a version whose entry was purged would wait forever: it is a CONFLICT, so
        that the planner replans the document on its committed state."""
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
        arrived = Arrived()
        for work in parked:
            leader = blocking.get(work.document)
            gone = purged.get(work.document)
            if leader is not None and work.message.value is not None:
                follower = Follower(work.operation, work.message.value, work.message)
                self.follow(uow, leader, [follower], now)
                arrived.followed.append(work)
            elif leader is None and gone is not None:
                reason = leader_purged(gone)
                log.warning("%s conflict: %s", work.message.context(), reason.message)
                work.move(Stage.CONFLICT, at=now, reason=reason)
                uow.save_operations(work.flush_changes())
                arrived.conflicted.append(work)
        return arrived

    def follow_leader(self, uow: UnitOfWork, leader: Operation, at: datetime) -> None:
        """Dead-letter the plans of ``leader``'s document parked behind it."""
        followers = [
            Follower(op, plan_bytes)
            for op, plan_bytes in uow.parked_on_document(leader.space, leader.document_id)
            if op.expected_revision > leader.expected_revision
        ]
        self.follow(uow, leader, followers, at)

    def follow(
        self,
        uow: UnitOfWork,
        leader: Operation,
        followers: Sequence[Follower],
        at: datetime,
    ) -> None:
        """Dead-letter ``followers`` (PARKED operations, locked by the caller) behind ``leader``,
        which is in the DLQ; they are released when it completes."""
        earlier = uow.dlq_entries(
            [dlq_id_of_operation(f.operation.operation_id) for f in followers]
        )
        first = uow.first_deliveries([f.operation.operation_id for f in followers])
        saved = []
        for follower in followers:
            op = follower.operation
            info = ErrorInfo(
                code=StatusCode.FAILED_PRECONDITION,
                error_class="ParkedBehind",
                message=f"parked behind {leader.operation_id}, which went to the DLQ: released "
                "again when it is replayed and completes",
            )
            dlq_id = dlq_id_of_operation(op.operation_id)
            envelope, attempt = self._envelope(
                uow, follower, leader, info, earlier.get(dlq_id), first.get(op.operation_id), at
            )
            dead_letter(uow, self._ladder.dlq_topic, dlq_id, envelope)
            self._routes.to_dlq(info.code)
            saved.append(
                record_failure(
                    op, Stage.DEAD_LETTERED, attempt, envelope.total_attempts, dlq_id
                ).model_copy(update={"parked_behind": leader.operation_id})  # as its entry says
            )
            log.error(
                "operation %s follows %s to the DLQ as %s",
                op.operation_id,
                leader.operation_id,
                dlq_id,
            )
        uow.save_operations(saved)

    def _envelope(
        self,
        uow: UnitOfWork,
        follower: Follower,
        leader: Operation,
        info: ErrorInfo,
        earlier: DlqEntry | None,
        first_delivery: Origin | None,
        at: datetime,
    ) -> tuple[DlqEnvelope, FailureAttempt]:
        """Record the follower's attempt and return its envelope (its history extended, its
        origin the earliest known: its entry's, its first failure's, its first delivery's) and
        the attempt."""
        op, plan_bytes, delivered = follower
        history = uow.failure_history(op.operation_id)
        trace_id = history[-1].detail.trace_id if history else new_trace_id()
        advice = retry_advice(TO_DLQ, ())
        attempt = FailureAttempt(
            source=None,
            operation_id=op.operation_id,
            attempt=history[-1].attempt + 1 if history else 1,
            tier=None,
            routed_to=RouteKind.DLQ.value,
            at=at,
            detail=failure_detail(
                info, trace_id, None, op.stage, advice, worker_id=self._worker_id
            ),
        )
        uow.record_failure(attempt)
        envelope = dlq_envelope(
            known_origin(earlier)
            or first_failed(earlier_deliveries(history, delivered))
            or first_delivery
            or (journey_start(delivered) if delivered else (self._ladder.plans_topic, None, None)),
            delivered.key if delivered else document_key(op.space, op.document_id).encode(),
            plan_bytes,
            delivered.headers if delivered else (),
            attempt_records([*history, attempt]),
            operation_id=op.operation_id,
            fingerprint=op.fingerprint,
            at=at,
            parked_behind=leader.operation_id,
        )
        return envelope, attempt
