"""What a worker's loops say about its health: a :class:`~graph_ingest.hooks.LoopSubscriber`
that keeps, per loop, the last heartbeat, the partitions assigned and each dependency's breaker
with the operators' word on it (forced open or closed, by whom, why, when).

Every event a loop fires is a heartbeat (``polled`` fires on every poll round, idle or paused
behind an open breaker, so an idle worker still beats); a loop counts as started from its first
event, which comes after it has joined and polled. The loops write on their own threads and the
health server reads on its threads, so the state sits behind one lock, held only to copy it;
:meth:`HealthSubscriber.snapshot` returns an immutable copy for the pure probes
(``observability.probes``). A loop announces its breakers (``breaker_forced``) before its first
poll; that is no heartbeat (the loop has not turned yet), so it is kept aside until the loop beats,
and every breaker shows from then on, closed until it changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from graph_ingest.domain.breaker_control import BreakerControl
from graph_ingest.hooks import (
    BatchHandled,
    BreakerChanged,
    BreakerForced,
    Committed,
    Consumed,
    LoopSubscriber,
    Polled,
    Rebalanced,
    Routed,
)
from graph_ingest.kafka.records import Partition
from graph_ingest.resilience.breaker import BreakerState


@dataclass(frozen=True, slots=True)
class LoopHealth:
    """One loop (the plans topic's, the retry tiers', the planner's) as last seen."""

    name: str
    heartbeat_age_s: float
    assigned: frozenset[Partition] = frozenset()
    breakers: Mapping[str, BreakerState] = field(default_factory=dict)
    forced: Mapping[str, BreakerControl | None] = field(default_factory=dict)
    """The operators' word per dependency (None: never forced)."""


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """A worker's loops at one moment; ``since_start_s``: how long ago the watching began (the
    heartbeat age of a worker none of whose loops has turned yet)."""

    worker: str
    since_start_s: float
    loops: tuple[LoopHealth, ...] = ()


@dataclass(slots=True)
class _Loop:
    heartbeat_at: float
    assigned: set[Partition] = field(default_factory=set)
    breakers: dict[str, BreakerState] = field(default_factory=dict)


class HealthSubscriber(LoopSubscriber):
    """Subscribe it to every loop of one worker (``wiring.run_applier(subscribers=...)``)."""

    def __init__(self, worker: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.worker = worker
        self._clock = clock
        self._started_at = clock()
        self._lock = threading.Lock()
        self._loops: dict[str, _Loop] = {}
        self._forced: dict[str, dict[str, BreakerControl | None]] = {}

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            now = self._clock()
            loops = tuple(
                LoopHealth(
                    name,
                    now - loop.heartbeat_at,
                    frozenset(loop.assigned),
                    {
                        **dict.fromkeys(forced := self._forced.get(name, {}), BreakerState.CLOSED),
                        **loop.breakers,
                    },
                    dict(forced),
                )
                for name, loop in sorted(self._loops.items())
            )
        return HealthSnapshot(self.worker, now - self._started_at, loops)

    def _beat(self, worker: str) -> _Loop:
        """The loop ``worker`` names, its heartbeat now; call with the lock held."""
        now = self._clock()
        loop = self._loops.get(worker)
        if loop is None:
            loop = self._loops[worker] = _Loop(now)
        loop.heartbeat_at = now
        return loop

    def polled(self, event: Polled) -> None:
        with self._lock:
            self._beat(event.worker)

    def consumed(self, event: Consumed) -> None:
        with self._lock:
            self._beat(event.worker)

    def batch_handled(self, event: BatchHandled) -> None:
        with self._lock:
            self._beat(event.worker)

    def routed(self, event: Routed) -> None:
        with self._lock:
            self._beat(event.worker)

    def committed(self, event: Committed) -> None:
        with self._lock:
            self._beat(event.worker)

    def rebalanced(self, event: Rebalanced) -> None:
        with self._lock:
            loop = self._beat(event.worker)
            loop.assigned = (loop.assigned | event.assigned) - event.revoked

    def breaker_changed(self, event: BreakerChanged) -> None:
        with self._lock:
            self._beat(event.worker).breakers[event.dependency] = BreakerState(event.state)

    def breaker_forced(self, event: BreakerForced) -> None:
        with self._lock:
            self._forced.setdefault(event.worker, {})[event.dependency] = event.control


__all__ = ["HealthSnapshot", "HealthSubscriber", "LoopHealth"]
