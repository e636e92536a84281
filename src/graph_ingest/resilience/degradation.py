"""The degradation level of an applier worker, from its circuit breakers (seed 002 §4.3).

* **L0** every breaker closed; **L1** exactly one breaker not closed (open or half-open);
  **L2** more than one; **L3** the worker itself is unhealthy (its caller says so: the Kafka
  consumer failed fatally, the loop stopped on an error), whatever the breakers say.
* A worse level is reported at once, and so is an improvement to a level other than L0 (L2 → L1).
  The step back to L0 waits until every breaker has stayed closed for ``stable_s``; meanwhile the
  reported level stays where it was, and a breaker that is not closed at an observation restarts
  the wait. So a dependency flapping open and closed does not flood the degradation topic with
  recoveries that do not last.

Pure: :class:`DegradationMonitor` only sees what it is shown, when it is shown it. The caller
observes after every change of a breaker's state (and now and then while waiting, so that the
recovery to L0 is reported once the window has passed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.resilience.breaker import BreakerState, Clock

WallClock = Callable[[], datetime]

DEFAULT_STABLE_S = 60.0


def degradation_level(
    breaker_states: Mapping[str, BreakerState], *, worker_healthy: bool = True
) -> DegradationLevel:
    """The level the breakers' states and the worker's own health say, right now."""
    if not worker_healthy:
        return DegradationLevel.L3
    not_closed = sum(state is not BreakerState.CLOSED for state in breaker_states.values())
    if not_closed == 0:
        return DegradationLevel.L0
    return DegradationLevel.L1 if not_closed == 1 else DegradationLevel.L2


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DegradationMonitor:
    """Turns observations of the breakers into the events of a worker's reported level.

    ``clock`` measures the stability window (monotonic seconds, as the breakers' clock);
    ``wall_clock`` stamps the events (aware UTC). The reported level starts at L0.
    """

    def __init__(
        self,
        worker_id: str,
        *,
        stable_s: float = DEFAULT_STABLE_S,
        clock: Clock = time.monotonic,
        wall_clock: WallClock = _utc_now,
    ) -> None:
        if stable_s <= 0:
            raise ValueError(f"degradation monitor {worker_id}: stable_s {stable_s} must be > 0")
        self.worker_id = worker_id
        self.stable_s = stable_s
        self._clock = clock
        self._wall_clock = wall_clock
        self.level = DegradationLevel.L0
        self._closed_since: float | None = None

    def observe(
        self, breaker_states: Mapping[str, BreakerState], *, worker_healthy: bool = True
    ) -> DegradationEvent | None:
        """The event if the reported level changes with this observation, else None."""
        raw = degradation_level(breaker_states, worker_healthy=worker_healthy)
        if raw is not DegradationLevel.L0:
            self._closed_since = None
            if raw is self.level:
                return None
            return self._report(raw, _not_closed_reason(breaker_states, worker_healthy))
        if self.level is DegradationLevel.L0:
            return None
        now = self._clock()
        if self._closed_since is None:
            self._closed_since = now
        if now - self._closed_since < self.stable_s:
            return None
        self._closed_since = None
        return self._report(DegradationLevel.L0, f"every breaker closed for {self.stable_s:g} s")

    def _report(self, level: DegradationLevel, reason: str) -> DegradationEvent:
        event = DegradationEvent(
            worker_id=self.worker_id,
            level=level,
            previous_level=self.level,
            reason=reason,
            at=self._wall_clock(),
        )
        self.level = level
        return event


def _not_closed_reason(breaker_states: Mapping[str, BreakerState], worker_healthy: bool) -> str:
    """E.g. ``circuit breaker open: neo4j; half-open: postgres`` (names sorted)."""
    parts = [
        f"{label}: {', '.join(names)}"
        for label, state in (("open", BreakerState.OPEN), ("half-open", BreakerState.HALF_OPEN))
        if (names := sorted(n for n, s in breaker_states.items() if s is state))
    ]
    breakers = f"circuit breaker {'; '.join(parts)}" if parts else "every breaker closed"
    return breakers if worker_healthy else f"worker unhealthy ({breakers})"


__all__ = [
    "DEFAULT_STABLE_S",
    "DegradationEvent",
    "DegradationLevel",
    "DegradationMonitor",
    "WallClock",
    "degradation_level",
]
