"""Routing a plan the apply loop blamed: to the next retry tier or to the DLQ, through the outbox.

In the caller's PostgreSQL transaction (its documents and operations locked), :class:`FailureRouter`
records the failed attempt (``failure_attempts``, unique per consumed message), moves the
operation (FAILED with its next retry time, or DEAD_LETTERED), writes the tier copy or the DLQ
envelope to the outbox and the DLQ index row. The Kafka offset is committed only after that
transaction: a message redelivered after a crash finds its attempt recorded and is not routed
twice, so routing is exactly once without Kafka transactions.

Where a failure goes is the retry policy's decision (``resilience.policy.route``), from the
delivery that failed and where the plan stands on the ladder (``ladder``: a resumed or released
plan starts neither its INTERNAL bound nor its ladder over). Plans of the same document parked
behind a dead-lettered one follow it to the DLQ (``followers``), and are released again when it
is replayed and completes (DESIGN.md §5, issue 6 item 4). A replayed message that fails again
returns to the entry it was replayed from, whether or not an operation owns it.

Nothing a message carries can make routing fail: header names and values, keys and error
messages are made storable before they reach PostgreSQL; the DLQ envelope keeps the bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from graph_ingest.consumers.applier.dead_letters import (
    attempt_record,
    attempt_records,
    dead_letter,
    failure_detail,
    record_failure,
)
from graph_ingest.consumers.applier.followers import FollowerRouter
from graph_ingest.consumers.applier.ladder import (
    Ladder,
    earlier_deliveries,
    first_failed,
    journey_start,
    known_origin,
)
from graph_ingest.consumers.applier.route_log import RouteLog
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.dlq.entries import (
    dlq_id_of_operation,
    dlq_id_of_position,
    replayed_from,
)
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.resilience.policy import (
    RouteKind,
    retry_advice,
    route,
)
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.schemas.headers import (
    RetryHeaders,
    trace_id_from_headers,
    with_retry_headers,
)
from graph_ingest.schemas.messages import dlq_envelope, retry_copy
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.failures import FailureAttempt

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Failure:
    message: PlanMessage
    info: ErrorInfo
    operation: Operation | None
    """The operation the message owns, locked by the caller; None when it owns none (it did not
    decode, or its operation id is bound to another plan)."""


class FailureRouter:
    def __init__(
        self, ladder: Ladder, *, worker_id: str, clock: Clock, routes: RouteLog | None = None
    ) -> None:
        """``routes``: where each tier copy and DLQ entry written is noted (``route_log``)."""
        self._ladder = ladder
        self._worker_id = worker_id
        self._clock = clock
        self._routes = routes if routes is not None else RouteLog()
        self._followers = FollowerRouter(ladder, worker_id=worker_id, routes=self._routes)

    def route(self, uow: UnitOfWork, failure: Failure) -> RouteKind:
        """Route one failure inside ``uow``; return where it went (TIER or DLQ)."""
        message, owned = failure.message, failure.operation
        history = uow.failure_history(owned.operation_id) if owned else []
        failed = earlier_deliveries(history, message)
        delivery, location = self._ladder.progress(message, failed)
        replayed = None if owned else self._replayed_entry(uow, message)
        decision = route(
            failure.info.code,
            delivery,
            location,
            len(self._ladder.tiers),
            self._ladder.max_internal_attempts,
        )
        if decision.kind is RouteKind.IN_PLACE:
            raise ValueError(
                f"{message.context()}: {failure.info.code} is waited out in place, never routed"
            )
        now = self._clock()
        trace_id = (
            trace_id_from_headers(message.headers)
            or (history[-1].detail.trace_id if history else None)
            or new_trace_id()
        )
        attempt = FailureAttempt(
            source=message.position,
            operation_id=owned.operation_id if owned else None,
            attempt=_next_attempt(history, replayed, delivery),
            tier=location.tier_index,
            routed_to=decision.kind.value,
            at=now,
            detail=failure_detail(
                failure.info,
                trace_id,
                message,
                owned.stage if owned else None,
                retry_advice(decision, [delay for _, delay in self._ladder.tiers]),
                worker_id=self._worker_id,
            ),
        )
        if not uow.record_failure(attempt):
            log.info("%s was routed before its offset was committed: not again", message.context())
            return decision.kind
        if decision.kind is RouteKind.TIER:
            assert decision.tier_index is not None  # a TIER route names its tier
            self._to_tier(uow, failure, decision.tier_index, attempt, delivery, history)
        else:
            self._to_dlq(uow, failure, [*history, attempt], replayed)
        return decision.kind

    def _replayed_entry(self, uow: UnitOfWork, message: PlanMessage) -> DlqEntry | None:
        """The entry a message that owns no operation was replayed from, when it holds this very
        message (an undecodable one, or a plan no operation took): a replay that fails again
        returns to it. An operation's own entry is its operation's, never a stranger's."""
        dlq_id = replayed_from(message.headers)
        if dlq_id is None:
            return None
        earlier = uow.dlq_entries([dlq_id]).get(dlq_id)
        if earlier is None or earlier.original_topic not in self._ladder.topics:
            return None  # unknown, or a planning entry (a request, not a plan)
        plan = message.plan
        held = (plan.operation_id, plan.fingerprint) if plan else (None, None)
        return earlier if (earlier.operation_id, earlier.fingerprint) == held else None

    # -- tiers -----------------------------------------------------------------------------

    def _to_tier(
        self,
        uow: UnitOfWork,
        failure: Failure,
        tier_index: int,
        attempt: FailureAttempt,
        delivery: int,
        history: Sequence[FailureAttempt],
    ) -> None:
        message, owned = failure.message, failure.operation
        earlier = earlier_deliveries(history, message)
        topic, delay_s = self._ladder.tiers[tier_index]
        due_at = attempt.at + timedelta(seconds=delay_s)
        first = message.retry
        detail = attempt.detail
        original_topic, original_partition, original_offset = first_failed(
            earlier
        ) or journey_start(message)
        retry = RetryHeaders(
            attempt=delivery + 1,
            due_at=due_at,
            original_topic=original_topic,
            original_partition=original_partition,
            original_offset=original_offset,
            first_failure_at=(
                earlier[0].at if earlier else first.first_failure_at if first else attempt.at
            ),
            error_code=detail.code,
            error_class=detail.error_class,
            error_message=detail.message,
            trace_id=detail.trace_id,
        )
        assert message.wire_value is not None  # only a decoded plan can be retried
        headers = with_retry_headers(message.headers, retry)
        self._routes.to_tier(delay_s)
        uow.enqueue(
            [
                retry_copy(
                    topic,
                    message.key,
                    message.wire_value,
                    headers,
                    operation_id=attempt.operation_id,
                )
            ]
        )
        log.warning(
            "%s failed with %s (%s): retry %d on %s at %s",
            message.context(),
            detail.code,
            detail.message,
            retry.attempt,
            topic,
            due_at.isoformat(),
            extra=message.log_fields(),
        )
        if owned is not None:
            failed = record_failure(owned, Stage.FAILED, attempt, len(history) + 1)
            due = {"next_retry_at": due_at, "retry_tier": tier_index}
            uow.save_operations([failed.model_copy(update=due)])

    # -- the DLQ ---------------------------------------------------------------------------

    def _to_dlq(
        self,
        uow: UnitOfWork,
        failure: Failure,
        history: Sequence[FailureAttempt],
        replayed: DlqEntry | None,
    ) -> None:
        """Dead-letter the message: an operation's failures into its one entry, rebuilt from its
        recorded history; a message that owns none into the entry it was replayed from, extended
        with this attempt (issue 16 item 6), else a new entry named by its position."""
        message, owned = failure.message, failure.operation
        last = history[-1]
        if replayed is not None:
            dlq_id = replayed.dlq_id
            envelope = decode_dlq_envelope(replayed.envelope).failed_again(attempt_record(last))
        else:
            dlq_id = (
                dlq_id_of_operation(owned.operation_id)
                if owned
                else dlq_id_of_position(*message.position)
            )
            earlier = uow.dlq_entries([dlq_id]).get(dlq_id)
            plan = message.plan
            envelope = dlq_envelope(
                known_origin(earlier)
                or first_failed(earlier_deliveries(history, message))
                or journey_start(message),
                message.key,
                message.wire_value,
                message.headers,
                attempt_records(history),
                operation_id=plan.operation_id if plan else None,
                fingerprint=plan.fingerprint if plan else None,
                at=last.at,
            )
        dead_letter(uow, self._ladder.dlq_topic, dlq_id, envelope)
        self._routes.to_dlq(last.detail.code)
        log.error(
            "%s dead-lettered as %s after %d attempt(s): %s %s",
            message.context(),
            dlq_id,
            envelope.total_attempts,
            last.detail.code,
            last.detail.message,
            extra=message.log_fields(),
        )
        if owned is None:
            return
        dead = record_failure(
            owned, Stage.DEAD_LETTERED, history[-1], envelope.total_attempts, dlq_id
        )
        uow.save_operations([dead])
        self._followers.follow_leader(uow, owned, history[-1].at)


def _next_attempt(
    history: Sequence[FailureAttempt], replayed: DlqEntry | None, delivery: int
) -> int:
    """The number of the attempt failing now: one past the operation's recorded history, or past
    the history of the entry the message was replayed from, else the delivery's number."""
    if history:
        return history[-1].attempt + 1
    if replayed is not None:
        return decode_dlq_envelope(replayed.envelope).attempts[-1].attempt + 1
    return delivery


__all__ = ["Failure", "FailureRouter", "Ladder"]
