"""The circuit breaker's state machine, on a fake clock."""

import pytest

from graph_ingest.domain.errors import DependencyUnavailable
from graph_ingest.graph.errors import GraphUnavailable
from graph_ingest.resilience.breaker import BreakerState, CircuitBreaker
from graph_ingest.resilience.classify import dependency_of
from graph_ingest.store.errors import StoreUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("neo4j", failure_threshold=3, probe_interval_s=1.0, clock=clock)


def test_consecutive_failures_open_it_and_a_success_resets_the_count() -> None:
    clock = Clock()
    b = breaker(clock)
    b.record_failure()
    b.record_failure()
    b.record_success()
    b.record_failure()
    b.record_failure()
    assert b.state is BreakerState.CLOSED
    b.record_failure()
    assert (b.state, b.consecutive_failures) == (BreakerState.OPEN, 3)


def test_an_open_breaker_asks_for_a_probe_once_per_interval() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    assert not b.probe_due()
    clock.now += 1.0
    assert b.probe_due()
    b.probed(answered=False)
    assert b.state is BreakerState.OPEN and not b.probe_due()
    clock.now += 1.0
    assert b.probe_due()


def test_a_probe_that_answers_half_opens_it_and_the_trial_batch_decides() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 1.0
    b.probed(answered=True)
    assert b.state is BreakerState.HALF_OPEN
    b.record_failure()  # the trial batch failed: open again at once
    assert (b.state, b.probe_due()) == (BreakerState.OPEN, False)
    clock.now += 1.0
    b.probed(answered=True)
    b.record_success()
    assert (b.state, b.consecutive_failures) == (BreakerState.CLOSED, 0)
    assert not b.probe_due()


def test_thresholds_are_checked() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker("x", failure_threshold=0, probe_interval_s=1)
    with pytest.raises(ValueError):
        CircuitBreaker("x", failure_threshold=1, probe_interval_s=0)


def test_an_error_names_its_dependency_through_its_causes() -> None:
    assert dependency_of(StoreUnavailable("down")) == "postgres"
    assert dependency_of(GraphUnavailable("down")) == "neo4j"
    wrapped = DependencyUnavailable("probe failed")
    wrapped.__cause__ = GraphUnavailable("down")
    assert dependency_of(wrapped) == "neo4j"
    assert dependency_of(RuntimeError("bug")) is None
