"""The applier's Kafka loop: poll a batch, apply it, commit offsets only after outcomes are durable.

A batch the retry policy says to retry in place (``resilience.policy``) is retried while every
owned partition is paused (the consumer keeps polling, so it stays in its group): with backoff,
or, once a dependency's circuit breaker is open (``resilience.breaker``), as soon as a probe of
that dependency answers. After each wait, messages of partitions revoked meanwhile leave the
batch: their next owner applies them, and this worker must not. SIGTERM (a set ``stop`` event)
finishes the batch in hand, commits, and leaves the group.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from graph_ingest.consumers.applier.apply import Outcome, PlanApplier, Position
from graph_ingest.consumers.applier.claims import resolve_claims
from graph_ingest.consumers.applier.routing import Ladder
from graph_ingest.consumers.batching import OffsetTracker, select_batch
from graph_ingest.consumers.decode_ahead import DecodeAhead
from graph_ingest.consumers.plan_message import PlanMessage, decode_message
from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import Partition, PlanConsumer
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.resilience.breaker import BreakerState, CircuitBreaker
from graph_ingest.resilience.classify import classify, dependency_of
from graph_ingest.resilience.degradation import DegradationMonitor
from graph_ingest.resilience.policy import (
    ACCESS_REFUSED,
    FailureScope,
    counts_towards_split,
    scope_of,
)
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)


class ApplierWorker:
    def __init__(
        self,
        settings: Settings,
        applier: PlanApplier,
        *,
        topics: Sequence[str] | None = None,
        applying: AbstractContextManager[object] | None = None,
        report_degradation: Callable[[DegradationEvent], object] = lambda event: None,
    ) -> None:
        """``topics``: the plans topic by default. ``applying``: held around every apply (a lock
        when loops share one applier)."""
        self._settings = settings
        self._applier = applier
        self._applying = applying or nullcontext()
        ladder = Ladder.of(settings)
        self._consumer: PlanConsumer[PlanMessage] = PlanConsumer(
            settings.kafka.consumer_config(settings.applier.group_id),
            list(topics or [ladder.plans_topic]),
            on_revoke=self._on_revoke,
            decode=functools.partial(
                decode_message, max_plan_bytes=settings.applier.max_plan_bytes
            ),
            tier_topics=ladder.tier_topics,
        )
        self._ahead: DecodeAhead[PlanMessage] = DecodeAhead(self._consumer.decode)
        self._tracker = OffsetTracker()
        self._pending: list[PlanMessage] = []
        self._committed: dict[Partition, int] = {}
        self._breakers = {
            name: CircuitBreaker(
                name,
                failure_threshold=settings.applier.breaker_failure_threshold,
                probe_interval_s=settings.applier.breaker_probe_interval_s,
            )
            for name in applier.dependencies
        }
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
                self._observe_degradation()
                self._consume(settings.poll_timeout_s, settings.batch_linger_s)
                if not self._pending:
                    continue
                batch, self._pending = select_batch(
                    self._pending, settings.batch_max_plans, settings.batch_max_bytes
                )
                self._fetch_ahead()
                if self._apply_with_retry(batch, stop) is None:
                    break
                self._commit()
        except BaseException:
            self._observe_degradation(healthy=False)
            raise
        finally:
            self._commit()
            self._consumer.close()
            self._ahead.close()
            log.info("applier stopped")

    # -- polling ---------------------------------------------------------------------------

    def _consume(self, timeout_s: float, linger_s: float) -> None:
        """Add to the pending messages what was fetched ahead, or else what the owned partitions
        deliver now (rebalance callbacks run inside the fetch, and may shrink ``_pending``: it is
        extended only after the call returns)."""
        if not self._ahead.in_flight:
            due_in = self._consumer.next_due_in()  # wake up for a retry when it is due
            if due_in is not None:
                timeout_s = min(timeout_s, max(due_in, 0.001))
            self._fetch(max(self._wanted(), 1), timeout_s, linger_s)
        polled = self._with_claims(self._ahead.take())
        self._tracker.consumed(polled)
        self._pending.extend(polled)

    def _fetch_ahead(self) -> None:
        """Fetch what is already at hand for the next batch, so it decodes while this one
        applies (``decode_ahead``)."""
        if (want := self._wanted()) > 0:
            self._fetch(want, 0.0, 0.0)

    def _fetch(self, want: int, timeout_s: float, linger_s: float) -> None:
        self._ahead.submit(self._consumer.fetch(want, timeout_s, linger_s))

    def _wanted(self) -> int:
        return self._settings.applier.batch_max_plans - len(self._pending)

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
        while True:
            try:
                with self._applying:
                    outcomes = self._applier.apply(
                        batch, in_place_exhausted=towards_split >= settings.in_place_max_attempts
                    )
            except Exception as exc:
                code = classify(exc)
                if scope_of(code) is FailureScope.PLAN:
                    raise  # the applier isolates plan failures: one escaping it is a bug
                towards_split = towards_split + 1 if counts_towards_split(code) else 0
                breaker = self._breaker_of(exc, code)
                open_breaker = breaker if breaker and breaker.state is BreakerState.OPEN else None
                delay = backoff.failed()
                waiting = (
                    f"probing {open_breaker.name} every {open_breaker.probe_interval_s:.1f}s"
                    if open_breaker is not None
                    else f"retry in {delay:.1f}s"
                )
                log.log(
                    logging.ERROR if code in ACCESS_REFUSED else logging.WARNING,
                    "batch of %d (first %s) failed with %s (%s: %s); retry %d: %s, "
                    "partitions paused",
                    len(batch),
                    batch[0].context(),
                    code,
                    type(exc).__name__,
                    exc,
                    backoff.failures,
                    waiting,
                )
                if open_breaker is not None:
                    waited = self._paused_wait(
                        stop, until=functools.partial(self._answers, open_breaker)
                    )
                else:
                    waited = self._paused_wait(stop, timeout_s=delay)
                if not waited:
                    return None
                batch = [m for m in batch if self._consumer.owns(m)]
                if not batch:
                    log.info("every partition of the batch was revoked during the wait")
                    return {}
                continue
            self._close_breakers()
            self._tracker.done(batch)
            return outcomes

    # -- breakers --------------------------------------------------------------------------

    def _breaker_of(self, exc: BaseException, code: StatusCode) -> CircuitBreaker | None:
        """The breaker of the dependency an outage-class failure is about, told of it."""
        if scope_of(code) is not FailureScope.DEPENDENCY:
            return None
        breaker = self._breakers.get(dependency_of(exc) or "")
        if breaker is None:
            return None
        was = breaker.state
        breaker.record_failure()
        if breaker.state is BreakerState.OPEN and was is not BreakerState.OPEN:
            log.warning(
                "circuit breaker for %s open after %d consecutive failures: partitions paused, "
                "probing it every %.1fs; nothing is failed or routed meanwhile",
                breaker.name,
                breaker.consecutive_failures,
                breaker.probe_interval_s,
            )
        return breaker

    def _answers(self, breaker: CircuitBreaker) -> bool:
        """Probe ``breaker``'s dependency if a probe is due; True once one answers (half-open)."""
        if not breaker.probe_due():
            return False
        try:
            with self._applying:
                self._applier.probe(breaker.name)
        except Exception as exc:
            log.debug("probe of %s failed: %s", breaker.name, exc)
            breaker.probed(answered=False)
            return False
        breaker.probed(answered=True)
        log.info("%s answers a probe: trying the batch again (breaker half-open)", breaker.name)
        return True

    def _close_breakers(self) -> None:
        for breaker in self._breakers.values():
            if breaker.state is not BreakerState.CLOSED:
                log.warning("circuit breaker for %s closed: consuming again", breaker.name)
            breaker.record_success()

    def _observe_degradation(self, *, healthy: bool = True) -> None:
        """Report a change of this worker's degradation level (``resilience.degradation``)."""
        states = {name: breaker.state for name, breaker in self._breakers.items()}
        event = self._degradation.observe(states, worker_healthy=healthy)
        if event is not None:
            log.log(
                logging.INFO if event.level is DegradationLevel.L0 else logging.WARNING,
                "degradation %s -> %s: %s",
                event.previous_level,
                event.level,
                event.reason,
            )
            self._report_degradation(event)

    def _paused_wait(
        self,
        stop: threading.Event,
        *,
        timeout_s: float | None = None,
        until: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Wait with every owned partition paused (new ones too) until ``timeout_s`` passed or
        ``until()`` holds, polling so the worker stays in its group; False if ``stop`` was set.
        Whatever still arrives joins the pending messages."""
        self._consumer.pause_all()
        try:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while not stop.is_set():
                self._observe_degradation()
                if until():
                    return True
                remaining = 0.5 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return True
                self._consume(min(remaining, 0.5), 0.0)
            return False
        finally:
            self._consumer.resume_all()

    # -- offsets ---------------------------------------------------------------------------

    def _commit(self) -> None:
        offsets = {
            tp: offset
            for tp, offset in self._tracker.committable().items()
            if self._committed.get(tp) != offset
        }
        self._committed.update(self._consumer.commit(offsets))

    def _on_revoke(self, revoked: set[Partition]) -> None:
        self._commit()
        self._tracker.forget(revoked)
        self._pending[:] = [m for m in self._pending if (m.topic, m.partition) not in revoked]
        self._ahead.discard(lambda m: (m.topic, m.partition) in revoked)
        for tp in revoked:
            self._committed.pop(tp, None)
