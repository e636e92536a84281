"""A circuit breaker per dependency, shaped for a batch loop (seed 002 §4).

``failure_threshold`` consecutive outage-class failures of a dependency open its breaker. While
it is open the loop does not retry whole batches on a growing backoff: it keeps its partitions
paused and probes the dependency every ``probe_interval_s``. The first probe that answers makes
the breaker half-open, and the next batch is the trial: success closes it, failure opens it again.
So a dependency that comes back is used again within about one probe interval, however long it
was away, and an outage spends no retry budget and routes nothing anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

Clock = Callable[[], float]


class BreakerState(StrEnum):
    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int,
        probe_interval_s: float,
        clock: Clock = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or probe_interval_s <= 0:
            raise ValueError(
                f"breaker {name}: failure_threshold {failure_threshold} must be >= 1 and "
                f"probe_interval_s {probe_interval_s} > 0"
            )
        self.name = name
        self.failure_threshold = failure_threshold
        self.probe_interval_s = probe_interval_s
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.consecutive_failures = 0
        self._last_probe_at: float | None = None

    def record_failure(self) -> None:
        """A batch failed because of this dependency."""
        self.consecutive_failures += 1
        if self.state is BreakerState.HALF_OPEN or (
            self.consecutive_failures >= self.failure_threshold
        ):
            self.state = BreakerState.OPEN
            self._last_probe_at = self._clock()

    def record_success(self) -> None:
        """A batch went through: the dependency works."""
        self.state = BreakerState.CLOSED
        self.consecutive_failures = 0
        self._last_probe_at = None

    def probe_due(self) -> bool:
        """Open, and a probe interval has passed since it opened or was last probed."""
        if self.state is not BreakerState.OPEN or self._last_probe_at is None:
            return False
        return self._clock() - self._last_probe_at >= self.probe_interval_s

    def probed(self, *, answered: bool) -> None:
        """Record a probe: one that answered makes the breaker half-open (the next batch is the
        trial); one that did not keeps it open until the next interval."""
        self._last_probe_at = self._clock()
        if answered and self.state is BreakerState.OPEN:
            self.state = BreakerState.HALF_OPEN


__all__ = ["BreakerState", "CircuitBreaker"]
