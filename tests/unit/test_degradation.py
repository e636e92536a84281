"""The degradation level of a worker and the events of its changes, on a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.degradation import DegradationMonitor, degradation_level

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN
L0, L1, L2, L3 = DegradationLevel.L0, DegradationLevel.L1, DegradationLevel.L2, DegradationLevel.L3
START = datetime(2026, 3, 24, 10, 30, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return START + timedelta(seconds=self.now - 1_000.0)


def states(
    postgres: BreakerState = CLOSED, neo4j: BreakerState = CLOSED
) -> dict[str, BreakerState]:
    return {"postgres": postgres, "neo4j": neo4j}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def monitor(clock: FakeClock) -> DegradationMonitor:
    return DegradationMonitor("worker-1", stable_s=60.0, clock=clock, wall_clock=clock.wall)


def levels(event: DegradationEvent | None) -> tuple[DegradationLevel, DegradationLevel] | None:
    return None if event is None else (event.previous_level, event.level)


def assert_back_to_l0_after(
    monitor: DegradationMonitor, clock: FakeClock, wait_s: float, *, previous: DegradationLevel
) -> None:
    """With every breaker closed from now on, L0 is reported ``wait_s`` from now and not before."""
    assert monitor.observe(states()) is None
    clock.now += wait_s - 0.5
    assert monitor.observe(states()) is None
    assert monitor.level is previous
    clock.now += 0.5
    assert levels(monitor.observe(states())) == (previous, L0)


# --- the raw level ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("postgres", "neo4j", "level"),
    [
        (CLOSED, CLOSED, L0),
        (OPEN, CLOSED, L1),
        (CLOSED, HALF_OPEN, L1),
        (OPEN, HALF_OPEN, L2),
        (OPEN, OPEN, L2),
        (HALF_OPEN, HALF_OPEN, L2),
    ],
)
def test_level_counts_the_breakers_that_are_not_closed(
    postgres: BreakerState, neo4j: BreakerState, level: DegradationLevel
) -> None:
    assert degradation_level(states(postgres, neo4j)) is level


@pytest.mark.parametrize("breakers", [states(), states(OPEN), states(OPEN, OPEN), {}])
def test_an_unhealthy_worker_is_l3_whatever_its_breakers_say(
    breakers: dict[str, BreakerState],
) -> None:
    assert degradation_level(breakers, worker_healthy=False) is L3


def test_no_breakers_at_all_is_l0() -> None:
    assert degradation_level({}) is L0


# --- worse levels: reported at once -------------------------------------------------------------


def test_nothing_is_reported_while_everything_stays_closed(
    monitor: DegradationMonitor, clock: FakeClock
) -> None:
    for _ in range(3):
        assert monitor.observe(states()) is None
        clock.now += 100
    assert monitor.level is L0


def test_one_breaker_opening_reports_l1_at_once_with_who_and_when(
    monitor: DegradationMonitor, clock: FakeClock
) -> None:
    clock.now += 5

    event = monitor.observe(states(neo4j=OPEN))

    assert event == DegradationEvent(
        worker_id="worker-1",
        level=L1,
        previous_level=L0,
        reason="circuit breaker open: neo4j",
        at=START + timedelta(seconds=5),
    )
    assert monitor.level is L1


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ([states(OPEN), states(OPEN, OPEN)], [(L0, L1), (L1, L2)]),
        ([states(OPEN, OPEN)], [(L0, L2)]),
        ([states(OPEN), (states(OPEN), False)], [(L0, L1), (L1, L3)]),
        ([states(OPEN, HALF_OPEN), (states(OPEN, HALF_OPEN), False)], [(L0, L2), (L2, L3)]),
        ([(states(), False)], [(L0, L3)]),
    ],
)
def test_every_worsening_is_reported_at_once(
    monitor: DegradationMonitor,
    path: list[dict[str, BreakerState] | tuple[dict[str, BreakerState], bool]],
    expected: list[tuple[DegradationLevel, DegradationLevel]],
) -> None:
    reported = []
    for step in path:
        breakers, healthy = step if isinstance(step, tuple) else (step, True)
        reported.append(levels(monitor.observe(breakers, worker_healthy=healthy)))
    assert reported == expected


def test_a_breaker_going_half_open_while_another_is_open_stays_at_the_same_level(
    monitor: DegradationMonitor,
) -> None:
    monitor.observe(states(OPEN, OPEN))

    assert monitor.observe(states(OPEN, HALF_OPEN)) is None
    assert monitor.level is L2


def test_the_reason_names_open_and_half_open_breakers_sorted(monitor: DegradationMonitor) -> None:
    breakers = {"postgres": HALF_OPEN, "neo4j": OPEN, "redis": OPEN}

    event = monitor.observe(breakers)

    assert event is not None
    assert event.reason == "circuit breaker open: neo4j, redis; half-open: postgres"


def test_the_reason_of_l3_says_the_worker_is_unhealthy(monitor: DegradationMonitor) -> None:
    event = monitor.observe(states(postgres=OPEN), worker_healthy=False)

    assert event is not None
    assert event.reason == "worker unhealthy (circuit breaker open: postgres)"
    healthy_breakers = DegradationMonitor("worker-2").observe(states(), worker_healthy=False)
    assert healthy_breakers is not None
    assert healthy_breakers.reason == "worker unhealthy (every breaker closed)"


# --- better levels: at once, except the step to L0 ----------------------------------------------


@pytest.mark.parametrize(
    ("start", "better", "expected"),
    [
        ((states(OPEN, OPEN), True), (states(OPEN), True), (L2, L1)),
        ((states(OPEN), False), (states(OPEN, OPEN), True), (L3, L2)),
        ((states(OPEN), False), (states(OPEN), True), (L3, L1)),
    ],
)
def test_an_improvement_to_l1_or_l2_is_reported_at_once(
    monitor: DegradationMonitor,
    start: tuple[dict[str, BreakerState], bool],
    better: tuple[dict[str, BreakerState], bool],
    expected: tuple[DegradationLevel, DegradationLevel],
) -> None:
    monitor.observe(start[0], worker_healthy=start[1])

    assert levels(monitor.observe(better[0], worker_healthy=better[1])) == expected


@pytest.mark.parametrize(
    ("start", "healthy"),
    [(states(OPEN), True), (states(OPEN, OPEN), True), (states(OPEN), False)],
)
def test_the_step_to_l0_waits_for_the_stability_window_at_the_previous_level(
    monitor: DegradationMonitor,
    clock: FakeClock,
    start: dict[str, BreakerState],
    healthy: bool,
) -> None:
    before = levels(monitor.observe(start, worker_healthy=healthy))
    assert before is not None
    degraded = before[1]

    # When every breaker closes, nothing is reported for 60 s: the level stays where it was.
    assert monitor.observe(states()) is None
    clock.now += 59.9
    assert monitor.observe(states()) is None
    assert monitor.level is degraded

    # Then the recovery is reported once.
    clock.now += 0.1
    event = monitor.observe(states())
    assert event == DegradationEvent(
        worker_id="worker-1",
        level=L0,
        previous_level=degraded,
        reason="every breaker closed for 60 s",
        at=START + timedelta(seconds=60),
    )
    assert monitor.observe(states()) is None
    assert monitor.level is L0


def test_the_window_starts_at_the_first_observation_with_every_breaker_closed(
    monitor: DegradationMonitor, clock: FakeClock
) -> None:
    monitor.observe(states(OPEN))
    clock.now += 500  # long open: the wait starts only when the breaker is seen closed

    assert_back_to_l0_after(monitor, clock, 60, previous=L1)


@pytest.mark.parametrize("again", [OPEN, HALF_OPEN])
def test_a_breaker_not_closed_during_the_window_restarts_the_wait(
    monitor: DegradationMonitor, clock: FakeClock, again: BreakerState
) -> None:
    monitor.observe(states(neo4j=OPEN))
    monitor.observe(states())
    clock.now += 59

    # Not closed again at the same level: not a change to report, but the wait starts again.
    assert monitor.observe(states(neo4j=again)) is None
    clock.now += 1
    assert_back_to_l0_after(monitor, clock, 60, previous=L1)


def test_a_worsening_during_the_window_is_reported_at_once_and_restarts_the_wait(
    monitor: DegradationMonitor, clock: FakeClock
) -> None:
    monitor.observe(states(neo4j=OPEN))
    monitor.observe(states())
    clock.now += 30

    assert levels(monitor.observe(states(OPEN, OPEN))) == (L1, L2)
    assert levels(monitor.observe(states(neo4j=HALF_OPEN))) == (L2, L1)
    assert_back_to_l0_after(monitor, clock, 60, previous=L1)


def test_the_window_is_configurable_and_named_in_the_reason(clock: FakeClock) -> None:
    monitor = DegradationMonitor("w", stable_s=2.5, clock=clock, wall_clock=clock.wall)
    monitor.observe(states(OPEN))
    monitor.observe(states())
    clock.now += 2.5

    event = monitor.observe(states())

    assert event is not None
    assert (event.level, event.reason) == (L0, "every breaker closed for 2.5 s")


@pytest.mark.parametrize("stable_s", [0.0, -1.0])
def test_a_window_that_is_not_positive_is_refused(stable_s: float) -> None:
    with pytest.raises(ValueError, match="stable_s"):
        DegradationMonitor("w", stable_s=stable_s)
