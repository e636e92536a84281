"""The planner worker: ingest requests in, frozen plans out, exactly once per request.

Per poll batch (``ingest.requests``, read_committed, offsets never committed by the consumer):

1. decode each request; one that does not decode (or whose key is not its ``space/documentId``,
   or whose ``submission_id`` header is no id PostgreSQL can hold) becomes a planning DLQ entry
   at once, with its coordinates and the reason;
2. plan each request (``RequestPlanner.plan_request``: the plan and its extraction issues). A
   transient failure (``resilience.policy.planning_action``) holds that request's partition at
   that request — paused, rewound, resumed when the backoff (or the ``retry_after_s`` the
   extractor was told) has passed — while other partitions flow; past
   ``PLANNER__RETRY_BUDGET_S``, or at once for a permanent failure, the request becomes a
   planning DLQ entry. A store read on the way (a replan's standing) that fails is handled the
   same way: a PostgreSQL outage holds the partition, it never ends the worker;
3. in one PostgreSQL transaction: the claim-checked plans (too large for the plans topic), the
   DLQ index rows (a replayed request that fails again extends the entry it was replayed from:
   ``consumers.planner.planning_dlq``) and what each submission became (``ingest_submissions``, with
   its plan's extraction issues, which ``status`` shows);
4. in **one Kafka transaction**: the plans (``plan_message``, with the submission id and a child
   of the request's ``traceparent``), the DLQ envelopes, and the offsets of the requests handled
   (``send_offsets_to_transaction`` with the consumer's group metadata). A crash before the
   commit leaves nothing visible to read_committed readers, and the requests are planned again
   by whoever owns their partitions next.

If step 3 or 4 fails, the batch's partitions are rewound to its first requests, their documents
forgotten (their plans were not published), and the batch is planned again after a backoff (after
a takeover of the transactional.id if the producer gave its client up: ``planner.takeover``).
PostgreSQL is written first: a plan's claim (and a DLQ index row) may exist without its event (an
aborted transaction), never the event without the claim. A partition revoked from this worker makes
the planner forget its documents: their next owner plans them from their committed state. SIGTERM
(``stop``) ends the loop between batches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from confluent_kafka import TopicPartition

from graph_ingest.consumers.planner.conflicts import ConflictWatcher
from graph_ingest.consumers.planner.handled import (
    DEAD_LETTERED,
    Handled,
    handled_plan,
    next_offsets,
    replan_dropped,
    request_submission_id,
    submissions,
)
from graph_ingest.consumers.planner.planning_dlq import PlanningFailure, dead_letter_requests
from graph_ingest.consumers.planner.requests import RequestMessage, decode_request_message
from graph_ingest.consumers.planner.takeover import TakeOver, planner_producer
from graph_ingest.consumers.runtime import RebalanceHooks, poll_timeout
from graph_ingest.hooks import Hooks
from graph_ingest.kafka.consumer import TypedConsumer
from graph_ingest.kafka.errors import ProducerFenced
from graph_ingest.kafka.records import Partition, Position
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.planning.errors import ExtractionFailed
from graph_ingest.planning.request_planner import PlannedRequest, RequestPlanner
from graph_ingest.producers.replans import (
    ConflictAction,
    ReplanMark,
    replan_mark,
    replan_operation_id,
    replan_standing,
)
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.resilience.classify import classify
from graph_ingest.resilience.policy import PlanningAction, planning_action
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.submissions import Replan, ReplanOutcome

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Retrying:
    """A request whose planning failed: its backoff, and since when it fails."""

    backoff: Backoff
    first_failure_at: datetime


class PlannerWorker:
    def __init__(
        self,
        settings: Settings,
        planner: RequestPlanner,
        store: OperationStore,
        *,
        clock: Clock = _utc_now,
        producer: TransactionalProducer | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        """``producer``: the transactional producer (crash tests halt one); ``hooks``: watchers."""
        self._settings = settings.planner
        self._topics = settings.topics
        self._planner = planner
        self._store = store
        self._clock = clock
        self._hooks = hooks or Hooks(settings.planner.worker_id)
        rebalances = RebalanceHooks(self._hooks, self._on_revoke)
        self._consumer: TypedConsumer[RequestMessage] = TypedConsumer(
            settings.kafka.consumer_config(settings.planner.group_id),
            [settings.topics.requests],
            on_revoke=rebalances.revoked,
            on_assign=rebalances.assigned,
            decode=decode_request_message,
            clock=lambda: self._clock().timestamp(),
        )
        self._producer = producer or planner_producer(settings)
        self._conflicts = ConflictWatcher(settings, store, clock=clock)
        self._retrying: dict[Position, _Retrying] = {}
        self._documents: dict[Partition, set[tuple[str, str]]] = {}
        self._take_over = TakeOver(
            self._producer,
            (self._consumer, self._conflicts),
            timeout_s=settings.planner.transaction_timeout_s,
        )
        self._batch_backoff = Backoff(
            settings.planner.retry_initial_backoff_s, settings.planner.retry_max_backoff_s
        )

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        settings = self._settings
        self._producer.take_over()
        self._consumer.start()
        self._conflicts.start()
        log.info(
            "planner consuming %s as group %s, transactional.id %s",
            self._topics.requests,
            settings.group_id,
            settings.transactional_id,
        )
        try:
            while not stop.is_set():
                if self._take_over.due() and not self._take_over.settle():
                    stop.wait(self._batch_backoff.failed())
                    continue
                timeout = poll_timeout(self._consumer, settings.poll_timeout_s)
                batch = self._consumer.consume(
                    settings.batch_max_requests, timeout, settings.batch_linger_s
                )
                self._hooks.consumed(len(batch))
                self._hooks.polled()
                started = time.monotonic()
                handled = self._plan_batch(batch)
                published = not handled or self._publish(handled, started)
                stepped = self._producer.ready and self._conflicts.step(self._producer)
                if not (stepped and published):
                    stop.wait(self._batch_backoff.delay())
        finally:
            self._conflicts.close()
            self._consumer.close()
            self._producer.close()
            log.info("planner stopped")

    # -- planning --------------------------------------------------------------------------

    def _plan_batch(self, batch: Sequence[RequestMessage]) -> list[Handled]:
        """Plan what can be planned, in order per partition; a partition whose request must
        wait for a retry is held there, and its later requests wait with it."""
        handled: list[Handled] = []
        held: set[Partition] = set()
        seen: set[tuple[str, str]] = set()  # documents with a request earlier in the batch
        replans: set[str] = set()  # conflicted operations replanned in the batch
        for message in batch:
            partition = (message.topic, message.partition)
            if partition in held:
                continue
            if message.request is None:
                assert message.error is not None  # decode keeps why on the message
                handled.append(self._dead_letter(message, message.error, attempts=1))
                continue
            try:
                handled.append(self._plan_message(message, seen, replans))
            except Exception as exc:  # planning or a store read (an outage): retried, or the DLQ
                outcome = self._failed(message, exc)
                if outcome is None:
                    held.add(partition)
                else:
                    handled.append(outcome)
        return handled

    def _plan_message(
        self, message: RequestMessage, seen: set[tuple[str, str]], replans: set[str]
    ) -> Handled:
        """One decoded request planned (or a replan dropped); raises what planning, or a read
        of the store on the way, raised."""
        request = message.request
        assert request is not None
        key = (request.space, request.document_id)
        mark = replan_mark(message.headers)
        if mark is not None:
            skipped = self._replan_skipped(message, mark, key in seen, replans)
            if skipped is not None:
                return skipped
            self._planner.forget([key])  # the replan plans on the committed state
            replans.add(mark.replan_of)
            if request.operation_id is not None:
                derived = replan_operation_id(request.operation_id, mark.attempt)
                request = request.model_copy(update={"operation_id": derived})
        seen.add(key)
        planned = self._planner.plan_request(request)
        self._documents.setdefault((message.topic, message.partition), set()).add(key)
        if mark is not None:
            return self._replanned(message, mark, planned)
        return handled_plan(message, planned, self._topics)

    def _replan_skipped(
        self, message: RequestMessage, mark: ReplanMark, after_another: bool, replans: set[str]
    ) -> Handled | None:
        """A re-submitted request that is not to be planned (its Handled: nothing sent), or None.
        ``after_another``: a request of its document came earlier in the batch."""
        if mark.replan_of in replans:
            action = ConflictAction.DUPLICATE
        elif after_another:
            action = ConflictAction.SUPERSEDED
        else:
            newest = self._store.newest_submission(*self._key(message))
            action = replan_standing(mark, request_submission_id(message), newest, None)
        if action is ConflictAction.REPLAN:
            return None
        return replan_dropped(message, mark, action, at=self._clock())

    def _replanned(
        self, message: RequestMessage, mark: ReplanMark, planned: PlannedRequest
    ) -> Handled:
        """A replan planned: still the document's replan, or a second copy of one made already
        (dropped, and its planned state with it)."""
        plan = planned.plan
        try:
            newest = self._store.newest_submission(plan.space, plan.document_id)
        except Exception:
            self._planner.forget([(plan.space, plan.document_id)])  # the replan is planned again
            raise
        action = replan_standing(mark, request_submission_id(message), newest, plan.operation_id)
        if action is not ConflictAction.REPLAN:
            self._planner.forget([(plan.space, plan.document_id)])
            return replan_dropped(message, mark, action, at=self._clock())
        log.info(
            "%s replan %d of op=%s planned as op=%s",
            message.context(),
            mark.attempt,
            mark.replan_of,
            plan.operation_id,
        )
        replan = Replan(
            operation_id=mark.replan_of,
            submission_id=request_submission_id(message) or plan.operation_id,
            attempt=mark.attempt,
            outcome=ReplanOutcome.REPLANNED,
            at=self._clock(),
            replanned_as=plan.operation_id,
        )
        return replace(handled_plan(message, planned, self._topics), replan=replan)

    @staticmethod
    def _key(message: RequestMessage) -> tuple[str, str]:
        assert message.document is not None  # only decoded requests are replans
        return message.document

    def _failed(self, message: RequestMessage, exc: Exception) -> Handled | None:
        """A request that failed planning: hold its partition for a retry (None), or its DLQ
        entry."""
        now = self._clock()
        retrying = self._retrying.get(message.position)
        if retrying is None:
            backoff = Backoff(
                self._settings.retry_initial_backoff_s, self._settings.retry_max_backoff_s
            )
            retrying = self._retrying[message.position] = _Retrying(backoff, now)
        delay = retrying.backoff.failed()
        attempts = retrying.backoff.failures
        code = classify(exc)
        failing_for_s = (now - retrying.first_failure_at).total_seconds()
        action = planning_action(
            code, failing_for_s=failing_for_s, budget_s=self._settings.retry_budget_s
        )
        if action is PlanningAction.DLQ:
            return self._dead_letter(message, exc, attempts=attempts)
        asked = exc.retry_after_s if isinstance(exc, ExtractionFailed) else None
        delay = max(delay, asked or 0.0)
        log.warning(
            "%s planning failed with %s (%s: %s); retry %d in %.1fs, partition held",
            message.context(),
            code,
            type(exc).__name__,
            exc,
            attempts,
            delay,
        )
        self._consumer.hold(
            (message.topic, message.partition), message.offset, now.timestamp() + delay
        )
        return None

    def _dead_letter(
        self, message: RequestMessage, exc: BaseException, *, attempts: int
    ) -> Handled:
        failure = PlanningFailure(message, exc, attempts=attempts, at=self._clock())
        return Handled(message, None, failure=failure)

    # -- publishing ------------------------------------------------------------------------

    def _publish(self, handled: Sequence[Handled], started: float) -> bool:
        """Records, then plans, DLQ envelopes and offsets in one Kafka transaction. False (the
        batch rewound, its documents forgotten) if either failed."""
        offsets = next_offsets(handled)
        try:
            with self._store.unit_of_work() as uow:
                uow.put_plan_claims([item.claim for item in handled if item.claim])
                failures = [item.failure for item in handled if item.failure]
                dead = dead_letter_requests(
                    uow, failures, worker_id=self._settings.worker_id, dlq_topic=self._topics.dlq
                )
                entries = {
                    f.message.position: entry
                    for f, entry in zip(failures, dead.entries, strict=True)
                }
                uow.record_submissions(submissions(handled, entries, self._clock()))
                uow.record_replans([item.replan for item in handled if item.replan])
            self._producer.produce_transaction(
                [*(item.outgoing for item in handled if item.outgoing), *dead.messages],
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                group_metadata=self._consumer.group_metadata(),
            )
        except ProducerFenced:
            raise  # another worker runs under this transactional.id: this one must stop
        except Exception as exc:
            self._abandon(handled, exc)
            return False
        self._batch_backoff.succeeded()
        for item in handled:
            self._retrying.pop(item.message.position, None)
            if item.plan is not None:
                log.info(
                    "%s planned op=%s revision %d -> %s",
                    item.message.context(),
                    item.plan.operation_id,
                    item.plan.expected_revision,
                    self._topics.plans,
                )
        self._report(handled, offsets, started)
        return True

    def _report(
        self, handled: Sequence[Handled], offsets: dict[Partition, int], started: float
    ) -> None:
        """Fire the batch's hooks (nothing is built when no one subscribes)."""
        if self._hooks.subscribers:
            outcomes = {item.message.position: item.outcome for item in handled}
            self._hooks.batch_handled(outcomes, time.monotonic() - started)
            self._hooks.routed({p: o for p, o in outcomes.items() if o == DEAD_LETTERED})
            self._hooks.committed(offsets)

    def _abandon(self, handled: Sequence[Handled], exc: Exception) -> None:
        self._batch_backoff.failed()
        firsts: dict[Partition, int] = {}
        for item in handled:
            firsts.setdefault((item.message.topic, item.message.partition), item.message.offset)
        log.warning(
            "batch of %d requests (first %s) not published (%s: %s): planning it again",
            len(handled),
            handled[0].message.context(),
            type(exc).__name__,
            exc,
        )
        self._consumer.rewind(firsts)
        self._planner.forget({key for item in handled if (key := item.message.document)})

    # -- rebalances ------------------------------------------------------------------------

    def _on_revoke(self, revoked: set[Partition]) -> None:
        forgotten = set().union(*(self._documents.pop(p, set()) for p in revoked))
        if forgotten:
            self._planner.forget(forgotten)
        self._retrying = {
            position: retrying
            for position, retrying in self._retrying.items()
            if position[:2] not in revoked
        }


__all__ = ["PlannerWorker", "planner_producer"]
