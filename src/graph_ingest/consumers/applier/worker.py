"""The applier's Kafka loop: poll a batch, apply it, commit offsets only after outcomes are durable.

A batch the retry policy says to retry in place (``resilience.policy``) is retried while every
owned partition is paused (``consumers.runtime.paused_wait``: the consumer keeps polling, so it
stays in its group): with backoff, or, once a dependency's circuit breaker is open
(``consumers.breakers``), as soon as a probe of that dependency answers. After each wait,
messages of partitions revoked meanwhile leave the batch: their next owner applies them, and this
worker must not. A breaker an operator forced open (``consumers.breakers``, the word read once
per round) holds the loop in the same paused wait before it takes or applies anything. SIGTERM
(a set ``stop`` event) finishes the batch in hand, commits, and leaves the group. The loop fires
its lifecycle hooks (``hooks``) per poll and per batch.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from graph_ingest.consumers.applier.apply import Outcome, PlanApplier
from graph_ingest.consumers.applier.claims import resolve_claims
from graph_ingest.consumers.applier.outages import OutageWatch
from graph_ingest.consumers.applier.route_log import tier_label
from graph_ingest.consumers.applier.routing import Ladder
from graph_ingest.consumers.batching import Footprints, select_batch
from graph_ingest.consumers.breakers import Breakers, Controls, nothing_forced
from graph_ingest.consumers.decode_ahead import DecodeAhead
from graph_ingest.consumers.offsets import OffsetCommitter
from graph_ingest.consumers.plan_message import PlanMessage, decode_message
from graph_ingest.consumers.runtime import (
    RebalanceHooks,
    collect_young_garbage,
    paused_wait,
    poll_timeout,
)
from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.hooks import Hooks
from graph_ingest.kafka.consumer import TypedConsumer, Usable
from graph_ingest.kafka.records import Partition, Position
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.classify import classify, retry_reason
from graph_ingest.resilience.degradation import DegradationMonitor
from graph_ingest.resilience.policy import (
    ACCESS_REFUSED,
    FailureScope,
    counts_towards_split,
    scope_of,
)
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)

_ROUTED = frozenset({Outcome.RETRYING, Outcome.DEAD_LETTERED})
_Notes = tuple[dict[str, float], dict[str, int], dict[str, int]]


class ApplierWorker:
    def __init__(
        self,
        settings: Settings,
        applier: PlanApplier,
        *,
        topics: Sequence[str] | None = None,
        applying: AbstractContextManager[object] | None = None,
        report_degradation: Callable[[DegradationEvent], object] = lambda event: None,
        hooks: Hooks | None = None,
        controls: Controls = nothing_forced,
    ) -> None:
        """``topics``: the plans topic by default. ``applying``: held around every apply (a lock
        when loops share one applier). ``hooks``: whoever watches the loop (none by default).
        ``controls``: the operators' forced breaker modes (none forced by default)."""
        self._settings = settings
        self._applier = applier
        self._applying = applying or nullcontext()
        self._hooks = hooks or Hooks(settings.applier.worker_id)
        ladder = Ladder.of(settings)
        self._tier_labels = {topic: tier_label(delay_s) for topic, delay_s in ladder.tiers}
        rebalances = RebalanceHooks(self._hooks, self._on_revoke)
        self._consumer: TypedConsumer[PlanMessage] = TypedConsumer(
            settings.kafka.consumer_config(settings.applier.group_id),
            list(topics or [ladder.plans_topic]),
            on_revoke=rebalances.revoked,
            on_assign=rebalances.assigned,
            decode=functools.partial(
                decode_message, max_plan_bytes=settings.applier.max_plan_bytes
            ),
            tier_topics=ladder.tier_topics,
        )
        self._ahead: DecodeAhead[PlanMessage] = DecodeAhead(self._consumer.decode)
        self._offsets = OffsetCommitter(self._consumer, self._hooks)
        self._pending: list[PlanMessage] = []
        self._footprints: Footprints = {}  # of the deferred plans in ``_pending``
        self._breakers = Breakers(
            applier.dependencies,
            failure_threshold=settings.applier.breaker_failure_threshold,
            probe_interval_s=settings.applier.breaker_probe_interval_s,
            hooks=self._hooks,
            controls=controls,
        )
        self._degradation = DegradationMonitor(
            settings.applier.worker_id, stable_s=settings.applier.degradation_stable_s
        )
        self._report_degradation = report_degradation

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        settings = self._settings.applier
        self._consumer.start()
        log.info("applier consuming as group %s", settings.group_id)
        try:
            while not stop.is_set():
                self._watch()
                if not self._hold_while_forced_open(stop):
                    break
                # Plans deferred from the last batch are work at hand: take what has arrived
                # since without waiting for more (the poll timeout is for an idle input).
                poll_s = 0.0 if self._pending else settings.poll_timeout_s
                if not self._pending and not self._ahead.in_flight:  # about to wait for plans
                    collect_young_garbage(self._settings.gc.idle_collect_min)
                self._consume(poll_s, settings.batch_linger_s)
                if self._pending and not self._apply_next_batch(stop):
                    break
        except BaseException:
            self._observe_degradation(healthy=False)
            raise
        finally:
            self._offsets.commit()
            self._consumer.close()
            self._ahead.close()
            log.info("applier stopped")

    def _apply_next_batch(self, stop: threading.Event) -> bool:
        """Apply a batch of the pending plans; False if asked to stop first. The batch is let go
        on return: an idle collection (``collect_young_garbage``) must not find it alive, or it
        would scan it and promote it to the older generations."""
        settings = self._settings.applier
        batch, self._pending = select_batch(
            self._pending,
            settings.batch_max_plans,
            settings.batch_max_bytes,
            settings.batch_max_locks,
            self._footprints,
        )
        self._fetch_at_hand(self._ahead.submit)
        if self._apply_with_retry(batch, stop) is None:
            return False
        self._offsets.commit()
        return True

    # -- polling ---------------------------------------------------------------------------

    def _consume(self, timeout_s: float, linger_s: float) -> None:
        """Add to the pending messages what was fetched ahead, or else what the owned partitions
        deliver now, then what is at hand (rebalance callbacks run inside the fetch, and may
        shrink ``_pending``: it is extended only after the call returns)."""
        if not self._ahead.in_flight:
            timeout_s = poll_timeout(self._consumer, timeout_s)  # wake up for a due retry
            waited = self._consumer.fetch(max(self._wanted(), 1), timeout_s, linger_s)
            self._ahead.decode_now(waited)
        self._fetch_at_hand(self._ahead.decode_now)  # arrived during the last apply: joins the next
        polled = self._with_claims(self._ahead.take())
        self._offsets.tracker.consumed(polled)
        self._pending.extend(polled)
        self._hooks.consumed(len(polled))
        if self._hooks.subscribers and polled:
            self._report_lateness(polled)
        self._hooks.polled()

    def _report_lateness(self, polled: list[PlanMessage]) -> None:
        now = time.time()
        self._hooks.retries_delivered(
            [
                (self._tier_labels.get(m.topic, m.topic), now - m.retry.due_at.timestamp())
                for m in polled
                if m.retry is not None
            ]
        )

    def _fetch_at_hand(self, decode: Callable[[Sequence[Usable]], None]) -> None:
        """Fetch what is already at hand for the next batch: ``DecodeAhead.submit`` decodes it
        while this batch applies, ``DecodeAhead.decode_now`` for a batch about to form."""
        if (want := self._wanted()) > 0:
            decode(self._consumer.fetch(want, 0.0, 0.0))

    def _wanted(self) -> int:
        return self._settings.applier.batch_max_plans - len(self._pending) - self._ahead.messages

    def _with_claims(self, polled: list[PlanMessage]) -> list[PlanMessage]:
        """Claim-check messages with their stored plans. If PostgreSQL cannot be asked now, each
        partition with such a message is fetched again from the first one (nothing after it is
        kept: order per partition), and the rest of the poll goes on."""
        try:
            return resolve_claims(polled, self._applier.plan_claims)
        except Exception as exc:
            if scope_of(classify(exc)) is not FailureScope.DEPENDENCY:
                raise
            firsts: dict[Partition, int] = {}
            for message in polled:
                if message.claim is not None:
                    firsts.setdefault((message.topic, message.partition), message.offset)
            log.warning(
                "claim-checked plans cannot be read (%s: %s): fetching %s again",
                type(exc).__name__,
                exc,
                sorted(firsts),
            )
            self._consumer.rewind(firsts)
            return [
                m
                for m in polled
                if (m.topic, m.partition) not in firsts or m.offset < firsts[(m.topic, m.partition)]
            ]

    # -- applying --------------------------------------------------------------------------

    def _apply_with_retry(
        self, batch: list[PlanMessage], stop: threading.Event
    ) -> dict[Position, Outcome] | None:
        """Apply until the batch has durable outcomes; None if asked to stop first (nothing
        committed for it). Marks the batch's messages done in the offset tracker."""
        settings = self._settings.applier
        backoff = Backoff(settings.retry_initial_backoff_s, settings.retry_max_backoff_s)
        towards_split = 0
        started = time.monotonic()
        outages = OutageWatch()
        while True:
            if self._breakers.forced_open() is not None:
                if not self._hold_while_forced_open(stop):
                    return None
                if not (batch := self._owned(batch)):
                    return {}
            try:
                with self._applying:
                    outcomes = self._applier.apply(
                        batch,
                        in_place_exhausted=towards_split >= settings.in_place_max_attempts,
                        waited=outages.waits,
                    )
                    notes = self._notes()
            except Exception as exc:
                code = classify(exc)
                if scope_of(code) is FailureScope.PLAN:
                    raise  # the applier isolates plan failures: one escaping it is a bug
                towards_split = towards_split + 1 if counts_towards_split(code) else 0
                if not self._wait_to_retry(batch, exc, backoff, stop, outages):
                    return None
                if not (batch := self._owned(batch)):
                    return {}
                continue
            self._breakers.close_all()
            self._offsets.tracker.done(batch)
            self._report(batch, outcomes, notes, time.monotonic() - started, backoff.failures + 1)
            return outcomes

    def _owned(self, batch: list[PlanMessage]) -> list[PlanMessage]:
        """The messages of ``batch`` whose partitions this loop still owns after a wait."""
        owned = [m for m in batch if self._consumer.owns(m)]
        if not owned:
            log.info("every partition of the batch was revoked during the wait")
        return owned

    def _hold_while_forced_open(self, stop: threading.Event) -> bool:
        """Wait, every partition paused, while an operator holds a dependency's breaker open
        (nothing taken, nothing applied, nothing routed); False if ``stop`` was set first."""
        control = self._breakers.forced_open()
        if control is None:
            return True
        log.warning(
            "circuit breaker for %s forced open by %s at %s (%s): partitions paused until it is "
            "closed or released",
            control.dependency,
            control.by,
            control.at.isoformat(),
            control.reason,
        )
        held = paused_wait(
            self._consumer,
            stop,
            poll=functools.partial(self._consume, linger_s=0.0),
            watch=self._watch,
            until=lambda: self._breakers.forced_open() is None,
        )
        if held:
            log.warning(
                "circuit breaker for %s no longer forced open: consuming", control.dependency
            )
        return held

    def _wait_to_retry(
        self,
        batch: list[PlanMessage],
        exc: Exception,
        backoff: Backoff,
        stop: threading.Event,
        outages: OutageWatch,
    ) -> bool:
        """Wait, partitions paused, until the failed batch may be tried again: the backoff, or
        until a probe answers once the failing dependency's breaker is open (an outage the
        batch is held through: ``outages``). False if ``stop`` was set first."""
        code = classify(exc)
        self._hooks.retried_in_place(retry_reason(exc))
        breaker = self._breakers.failed(exc, code)
        open_breaker = breaker if breaker and breaker.state is BreakerState.OPEN else None
        delay = backoff.failed()
        waiting = (
            f"probing {open_breaker.name} every {open_breaker.probe_interval_s:.1f}s"
            if open_breaker is not None
            else f"retry in {delay:.1f}s"
        )
        log.log(
            logging.ERROR if code in ACCESS_REFUSED else logging.WARNING,
            "batch of %d (first %s) failed with %s (%s: %s); retry %d: %s, partitions paused",
            len(batch),
            batch[0].context(),
            code,
            type(exc).__name__,
            exc,
            backoff.failures,
            waiting,
        )
        poll = functools.partial(self._consume, linger_s=0.0)
        if open_breaker is None:
            return paused_wait(self._consumer, stop, poll=poll, watch=self._watch, timeout_s=delay)
        answers = functools.partial(self._breakers.answers, open_breaker, self._probe)
        outages.held(open_breaker.name)
        if not paused_wait(self._consumer, stop, poll=poll, watch=self._watch, until=answers):
            return False
        outages.answered(open_breaker.name)
        return True

    def _probe(self, dependency: str) -> None:
        with self._applying:
            self._applier.probe(dependency)

    def _report(
        self,
        batch: list[PlanMessage],
        outcomes: Mapping[Position, Outcome],
        notes: _Notes | None,
        duration_s: float,
        attempts: int,
    ) -> None:
        """Fire the batch's hooks (nothing is built when no one subscribes)."""
        if not self._hooks.subscribers or notes is None:
            return
        steps, tiers, dead_letters = notes
        self._hooks.steps_timed(steps)
        self._hooks.routes_taken(tiers, dead_letters)
        self._hooks.batch_handled(outcomes, duration_s, attempts)
        self._hooks.routed({p: o for p, o in outcomes.items() if o in _ROUTED})
        now = time.time()
        self._hooks.plans_completed(
            [
                now - m.timestamp_s
                for m in batch
                if m.timestamp_s is not None and outcomes.get(m.position) is Outcome.COMPLETED
            ]
        )

    def _notes(self) -> _Notes | None:
        """What the applier noted of the apply just done (its step times, the routes it wrote),
        copied while the loops' shared lock is held (the other loop's apply would clear them);
        None when no one subscribes."""
        if not self._hooks.subscribers:
            return None
        tiers, dead_letters = self._applier.routes.take()
        return dict(self._applier.step_seconds), tiers, dead_letters

    def _watch(self) -> None:
        """Every round: the operators' latest word on the breakers, then the degradation level."""
        self._breakers.sync()
        self._observe_degradation()

    def _observe_degradation(self, *, healthy: bool = True) -> None:
        """Report a change of this worker's degradation level (``resilience.degradation``)."""
        event = self._degradation.observe(self._breakers.states(), worker_healthy=healthy)
        if event is not None:
            log.log(
                logging.INFO if event.level is DegradationLevel.L0 else logging.WARNING,
                "degradation %s -> %s: %s",
                event.previous_level,
                event.level,
                event.reason,
            )
            self._report_degradation(event)
            self._hooks.degraded(int(event.level.value[1:]))

    # -- rebalances ------------------------------------------------------------------------

    def _on_revoke(self, revoked: set[Partition]) -> None:
        self._offsets.revoked(revoked)
        self._pending[:] = [m for m in self._pending if (m.topic, m.partition) not in revoked]
        self._ahead.discard(lambda m: (m.topic, m.partition) in revoked)
