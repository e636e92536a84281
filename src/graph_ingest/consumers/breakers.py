"""The circuit breakers of a worker's dependencies (``resilience.breaker``), as its loop uses them:
told of outage-class failures, probed while open, closed by a batch that goes through.

Every change of a breaker's state is logged once and fired to the hooks (``breaker_changed``),
so a metric or a health endpoint watches breakers without living in the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from graph_ingest.consumers.hooks import Hooks
from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.breaker import BreakerState, CircuitBreaker
from graph_ingest.resilience.classify import dependency_of
from graph_ingest.resilience.policy import FailureScope, scope_of

log = logging.getLogger(__name__)

Probe = Callable[[str], None]
"""Asks a dependency (by name) whether it answers; raises if it does not."""


class Breakers:
    """One breaker per dependency name."""

    def __init__(
        self,
        dependencies: Iterable[str],
        *,
        failure_threshold: int,
        probe_interval_s: float,
        hooks: Hooks,
    ) -> None:
        self._hooks = hooks
        self._breakers = {
            name: CircuitBreaker(
                name, failure_threshold=failure_threshold, probe_interval_s=probe_interval_s
            )
            for name in dependencies
        }

    def states(self) -> dict[str, BreakerState]:
        return {name: breaker.state for name, breaker in self._breakers.items()}

    def failed(self, exc: BaseException, code: StatusCode) -> CircuitBreaker | None:
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
        self._hooks.breaker_changed(breaker.name, was, breaker.state)
        return breaker

    def answers(self, breaker: CircuitBreaker, probe: Probe) -> bool:
        """Probe ``breaker``'s dependency if a probe is due; True once one answers (half-open)."""
        if not breaker.probe_due():
            return False
        try:
            probe(breaker.name)
        except Exception as exc:
            log.debug("probe of %s failed: %s", breaker.name, exc)
            breaker.probed(answered=False)
            return False
        breaker.probed(answered=True)
        log.info("%s answers a probe: trying the batch again (breaker half-open)", breaker.name)
        self._hooks.breaker_changed(breaker.name, BreakerState.OPEN, BreakerState.HALF_OPEN)
        return True

    def close_all(self) -> None:
        """A batch went through: every dependency works."""
        for breaker in self._breakers.values():
            was = breaker.state
            if was is not BreakerState.CLOSED:
                log.warning("circuit breaker for %s closed: consuming again", breaker.name)
            breaker.record_success()
            self._hooks.breaker_changed(breaker.name, was, BreakerState.CLOSED)


__all__ = ["Breakers", "Probe"]
