"""The circuit breakers of a worker's dependencies (``resilience.breaker``), as its loop uses them:
told of outage-class failures, probed while open, closed by a batch that goes through; and
forced open or closed by an operator for the whole group (``resilience.forcing``; the word comes
from ``controls``, the follower of the control topic, read once per round by :meth:`sync`).

Every change of a breaker's state (as forcing makes it) is logged once and fired to the hooks
(``breaker_changed``), and every change of its forced mode too (``breaker_forced``, fired for
every breaker at the first :meth:`sync`, so watchers know each one from the start): a metric or a
health endpoint watches breakers without living in the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.domain.status import StatusCode
from graph_ingest.hooks import Hooks
from graph_ingest.resilience.breaker import BreakerState, CircuitBreaker
from graph_ingest.resilience.classify import dependency_of
from graph_ingest.resilience.forcing import effective_state, holds_paused, opens_on_failure
from graph_ingest.resilience.policy import FailureScope, scope_of

log = logging.getLogger(__name__)

Probe = Callable[[str], None]
"""Asks a dependency (by name) whether it answers; raises if it does not."""

Controls = Callable[[], Mapping[str, BreakerControl]]
"""The operators' latest word per dependency (``kafka.control.ControlFollower.controls``): a
mapping replaced whole on a change, so the same object means nothing changed."""

_NOTHING_FORCED: Mapping[str, BreakerControl] = MappingProxyType({})


def nothing_forced() -> Mapping[str, BreakerControl]:
    """The controls of a loop that follows no control topic (tests, embedded use)."""
    return _NOTHING_FORCED


class Breakers:
    """One breaker per dependency name."""

    def __init__(
        self,
        dependencies: Iterable[str],
        *,
        failure_threshold: int,
        probe_interval_s: float,
        hooks: Hooks,
        controls: Controls = nothing_forced,
    ) -> None:
        self._hooks = hooks
        self._breakers = {
            name: CircuitBreaker(
                name, failure_threshold=failure_threshold, probe_interval_s=probe_interval_s
            )
            for name in dependencies
        }
        self._controls = controls
        self._synced: Mapping[str, BreakerControl] | None = None
        self._forced: Mapping[str, BreakerControl] = _NOTHING_FORCED

    def mode(self, name: str) -> BreakerMode:
        control = self._forced.get(name)
        return BreakerMode.AUTOMATIC if control is None else control.mode

    def states(self) -> dict[str, BreakerState]:
        """Each breaker's state as forcing makes it."""
        return {name: self._state(name) for name in self._breakers}

    def _state(self, name: str) -> BreakerState:
        return effective_state(self.mode(name), self._breakers[name].state)

    def forced_open(self) -> BreakerControl | None:
        """The operators' word that holds this loop paused now, if any."""
        for name in self._breakers:
            if holds_paused(self.mode(name)):
                return self._forced[name]
        return None

    def sync(self) -> None:
        """Take the operators' latest word (one read; nothing more unless it changed) and fire
        what it changes to the hooks. A breaker forced closed starts afresh (closed, no failures
        counted), so releasing it later does not bring back a stale open state."""
        controls = self._controls()
        if controls is self._synced:
            return
        first, self._synced = self._synced is None, controls
        states = self.states()
        previous, self._forced = self._forced, controls
        for name, breaker in self._breakers.items():
            control = controls.get(name)
            if not first and control == previous.get(name):
                continue
            if control is not None and control.mode is BreakerMode.FORCED_CLOSED:
                breaker.record_success()
            if not first or control is not None:
                log.warning("circuit breaker for %s now %s", name, _told(control))
            self._hooks.breaker_forced(name, control)
            self._hooks.breaker_changed(name, states[name], self._state(name))

    def failed(self, exc: BaseException, code: StatusCode) -> CircuitBreaker | None:
        """The breaker of the dependency an outage-class failure is about, told of it; None
        also when an operator holds that breaker closed (the loop retries with backoff)."""
        if scope_of(code) is not FailureScope.DEPENDENCY:
            return None
        breaker = self._breakers.get(dependency_of(exc) or "")
        if breaker is None or not opens_on_failure(self.mode(breaker.name)):
            return None
        was = self._state(breaker.name)
        breaker.record_failure()
        if breaker.state is BreakerState.OPEN and was is not BreakerState.OPEN:
            log.warning(
                "circuit breaker for %s open after %d consecutive failures: partitions paused, "
                "probing it every %.1fs; nothing is failed or routed meanwhile",
                breaker.name,
                breaker.consecutive_failures,
                breaker.probe_interval_s,
            )
        self._hooks.breaker_changed(breaker.name, was, self._state(breaker.name))
        return breaker

    def answers(self, breaker: CircuitBreaker, probe: Probe) -> bool:
        """Probe ``breaker``'s dependency if a probe is due; True once one answers (half-open),
        or at once when an operator forced it closed meanwhile."""
        if self.mode(breaker.name) is BreakerMode.FORCED_CLOSED:
            return True
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
        self._hooks.breaker_changed(breaker.name, BreakerState.OPEN, self._state(breaker.name))
        return True

    def close_all(self) -> None:
        """A batch went through: every dependency works."""
        for name, breaker in self._breakers.items():
            was = self._state(name)
            if breaker.state is not BreakerState.CLOSED:
                log.warning("circuit breaker for %s closed: consuming again", name)
            breaker.record_success()
            self._hooks.breaker_changed(name, was, self._state(name))


def _told(control: BreakerControl | None) -> str:
    if control is None:
        return "AUTOMATIC (the control record was removed)"
    return f"{control.mode} (by {control.by} at {control.at.isoformat()}: {control.reason!r})"


__all__ = ["Breakers", "Controls", "Probe", "nothing_forced"]
