"""The three health probes as pure functions of a :class:`~.health.HealthSnapshot`: what each
answers (HTTP status and JSON body), so the server only serves and the rules test without one.

* ``/health/live``: 200 while every loop's heartbeat (or, before any loop turned, the start of
  the watch) is younger than ``max_age_s``, else 503. It never looks at a dependency: a database
  outage pauses the loop behind a breaker, and the loop keeps polling, so it stays live — a
  restart would only lose the worker's place in its group.
* ``/health/startup``: 200 once a loop has turned (joined its group and polled), else 503.
* ``/health/ready``: ``ready`` (200); ``degraded`` (503) while a dependency's breaker is not
  closed (or an operator forced it open: ``breakers`` says by whom, why and when): the worker
  has paused its partitions and applies nothing until a probe answers (or it is freed), so
  it is not ready to do its work, and a readiness failure only takes a pod out of a Service's
  endpoints (a worker serves none) and shows ``0/1`` in ``kubectl get pods``, it never restarts
  it; ``not_ready`` (503) before startup or while the heartbeat is stale. The body says why.
  A worker with no partition assigned (more members than partitions) is ready: it is a healthy
  stand-by of its group. ``details``: what a worker adds of its own (the projector: its lag),
  shown, never judged here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.kafka.records import Partition
from graph_ingest.observability.health import HealthSnapshot, LoopHealth
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.degradation import degradation_level

_SEVERITY = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """An HTTP status (200: healthy in the probe's sense) and a JSON object."""

    status: int
    body: dict[str, Any]


def heartbeat_age_s(snapshot: HealthSnapshot) -> float:
    """The oldest loop's heartbeat age: the worker is only as live as its stuckest loop."""
    if not snapshot.loops:
        return snapshot.since_start_s
    return max(loop.heartbeat_age_s for loop in snapshot.loops)


def live(snapshot: HealthSnapshot, max_age_s: float) -> ProbeAnswer:
    age = heartbeat_age_s(snapshot)
    fresh = age < max_age_s
    return ProbeAnswer(
        HTTPStatus.OK if fresh else HTTPStatus.SERVICE_UNAVAILABLE,
        {
            "status": "live" if fresh else "stalled",
            "worker": snapshot.worker,
            "heartbeat_age_s": round(age, 3),
            "max_age_s": max_age_s,
        },
    )


def startup(snapshot: HealthSnapshot) -> ProbeAnswer:
    started = bool(snapshot.loops)
    return ProbeAnswer(
        HTTPStatus.OK if started else HTTPStatus.SERVICE_UNAVAILABLE,
        {"status": "started" if started else "starting", "worker": snapshot.worker},
    )


def dependencies(snapshot: HealthSnapshot) -> dict[str, BreakerState]:
    """Each dependency's breaker, the worst state any loop holds it in (every loop of an
    applier has breakers of its own), as an operator's forcing makes it."""
    worst: dict[str, BreakerState] = {}
    for loop in snapshot.loops:
        for name, state in loop.breakers.items():
            if _SEVERITY[state] >= _SEVERITY[worst.get(name, BreakerState.CLOSED)]:
                worst[name] = state
    return dict(sorted(worst.items()))


def forced(snapshot: HealthSnapshot) -> dict[str, BreakerControl]:
    """The operators' word per dependency that the loops obey (the same for every loop of a
    worker: they follow one control topic); a dependency never forced is absent."""
    return {
        name: control
        for loop in snapshot.loops
        for name, control in loop.forced.items()
        if control is not None
    }


def breakers(snapshot: HealthSnapshot) -> dict[str, dict[str, Any]]:
    """Each breaker: its state, its mode and, when forced, by whom, why and when."""
    words = forced(snapshot)
    shown: dict[str, dict[str, Any]] = {}
    for name, state in dependencies(snapshot).items():
        word = words.get(name)
        shown[name] = {"state": state.value, "mode": BreakerMode.AUTOMATIC.value}
        if word is not None:
            shown[name].update(word.model_dump(mode="json", exclude={"dependency"}))
    return shown


def _paused_because(
    not_closed: Mapping[str, BreakerState], words: Mapping[str, BreakerControl]
) -> str:
    """E.g. ``circuit breaker neo4j forced open by alice at …: upgrade; postgres OPEN``."""
    parts = []
    for name, state in not_closed.items():
        word = words.get(name)
        if word is not None and word.mode is BreakerMode.FORCED_OPEN:
            parts.append(f"{name} forced open by {word.by} at {word.at.isoformat()}: {word.reason}")
        else:
            parts.append(f"{name} {state}")
    return f"circuit breaker {'; '.join(parts)}: partitions paused"


def ready(
    snapshot: HealthSnapshot, max_age_s: float, details: Mapping[str, Any] | None = None
) -> ProbeAnswer:
    age = heartbeat_age_s(snapshot)
    states = dependencies(snapshot)
    level = degradation_level(states, worker_healthy=age < max_age_s)
    not_closed = {name: state for name, state in states.items() if state is not BreakerState.CLOSED}
    if not snapshot.loops:
        status, reason = "not_ready", "starting: no loop has polled yet"
    elif age >= max_age_s:
        status, reason = "not_ready", f"a loop has not turned for {age:.0f} s (stuck)"
    elif not_closed:
        status, reason = "degraded", _paused_because(not_closed, forced(snapshot))
    else:
        status, reason = "ready", "consuming"
    return ProbeAnswer(
        HTTPStatus.OK if status == "ready" else HTTPStatus.SERVICE_UNAVAILABLE,
        {
            "status": status,
            "reason": reason,
            "worker": snapshot.worker,
            "degradation_level": level.value,
            "dependencies": {name: state.value for name, state in states.items()},
            "breakers": breakers(snapshot),
            "assigned": _partitions(p for loop in snapshot.loops for p in loop.assigned),
            "heartbeat_age_s": round(age, 3),
            "loops": [_loop(loop) for loop in snapshot.loops],
            **(details or {}),
        },
    )


def _loop(loop: LoopHealth) -> dict[str, Any]:
    return {
        "name": loop.name,
        "heartbeat_age_s": round(loop.heartbeat_age_s, 3),
        "assigned": _partitions(loop.assigned),
        "breakers": {name: state.value for name, state in sorted(loop.breakers.items())},
    }


def _partitions(partitions: Iterable[Partition]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": partition} for topic, partition in sorted(partitions)]


__all__ = [
    "ProbeAnswer",
    "breakers",
    "dependencies",
    "forced",
    "heartbeat_age_s",
    "live",
    "ready",
    "startup",
]
