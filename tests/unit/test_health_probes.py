"""Health: what the loops' events make of a worker's live, startup and ready answers (pure)."""

from __future__ import annotations

import pytest

from graph_ingest.hooks import Hooks, LoopSubscriber, Polled
from graph_ingest.observability import probes
from graph_ingest.observability.health import HealthSubscriber

MAX_AGE_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def health(clock: Clock) -> HealthSubscriber:
    return HealthSubscriber("applier-0", clock=clock)


def loop_hooks(health: HealthSubscriber, name: str = "applier-0") -> Hooks:
    return Hooks(name, health)


def test_before_any_loop_turns_it_is_starting_not_ready_and_live_until_the_max_age(
    health: HealthSubscriber, clock: Clock
) -> None:
    assert probes.startup(health.snapshot()).status == 503
    answer = probes.ready(health.snapshot(), MAX_AGE_S)
    assert (answer.status, answer.body["status"]) == (503, "not_ready")
    assert "starting" in answer.body["reason"]
    assert probes.live(health.snapshot(), MAX_AGE_S).status == 200
    # a start that hangs (connecting forever) is no longer live once the max age has passed
    clock.now += MAX_AGE_S
    assert probes.live(health.snapshot(), MAX_AGE_S).body["status"] == "stalled"


def test_an_idle_loop_that_polls_is_started_live_and_ready_with_its_assignment(
    health: HealthSubscriber, clock: Clock
) -> None:
    hooks = loop_hooks(health)
    hooks.rebalanced(assigned=frozenset({("plans", 0), ("plans", 1), ("plans", 2)}))
    hooks.rebalanced(revoked=frozenset({("plans", 1)}))
    for _ in range(3):  # idle for far longer than the max age, polling all along
        clock.now += MAX_AGE_S / 2
        hooks.polled()
    snapshot = health.snapshot()
    assert probes.startup(snapshot).status == 200
    assert probes.live(snapshot, MAX_AGE_S).status == 200
    answer = probes.ready(snapshot, MAX_AGE_S)
    assert answer.status == 200
    assert answer.body["status"] == "ready"
    assert answer.body["worker"] == "applier-0"
    assert answer.body["degradation_level"] == "L0"
    assert answer.body["assigned"] == [
        {"topic": "plans", "partition": 0},
        {"topic": "plans", "partition": 2},
    ]


def test_an_open_breaker_makes_it_degraded_with_the_reason_and_it_stays_live(
    health: HealthSubscriber, clock: Clock
) -> None:
    hooks = loop_hooks(health)
    hooks.breaker_changed("neo4j", "CLOSED", "OPEN")
    clock.now += MAX_AGE_S / 2
    hooks.polled()  # paused behind the breaker, the loop keeps polling
    answer = probes.ready(health.snapshot(), MAX_AGE_S)
    assert (answer.status, answer.body["status"]) == (503, "degraded")
    assert "neo4j OPEN" in answer.body["reason"]
    assert answer.body["dependencies"] == {"neo4j": "OPEN"}
    assert answer.body["degradation_level"] == "L1"
    assert probes.live(health.snapshot(), MAX_AGE_S).status == 200
    # and a closed breaker makes it ready again
    hooks.breaker_changed("neo4j", "OPEN", "HALF_OPEN")
    hooks.breaker_changed("neo4j", "HALF_OPEN", "CLOSED")
    answer = probes.ready(health.snapshot(), MAX_AGE_S)
    assert (answer.status, answer.body["status"]) == (200, "ready")
    assert answer.body["dependencies"] == {"neo4j": "CLOSED"}


def test_a_dependency_is_as_bad_as_the_worst_loop_holds_it(health: HealthSubscriber) -> None:
    main, retry = loop_hooks(health), loop_hooks(health, "applier-0/retry")
    main.breaker_changed("neo4j", "CLOSED", "OPEN")
    main.breaker_changed("neo4j", "OPEN", "HALF_OPEN")
    retry.breaker_changed("neo4j", "CLOSED", "OPEN")
    retry.breaker_changed("postgres", "CLOSED", "OPEN")
    retry.breaker_changed("postgres", "OPEN", "CLOSED")
    answer = probes.ready(health.snapshot(), MAX_AGE_S)
    assert answer.body["dependencies"] == {"neo4j": "OPEN", "postgres": "CLOSED"}
    assert [loop["name"] for loop in answer.body["loops"]] == ["applier-0", "applier-0/retry"]


def test_one_stuck_loop_makes_the_worker_stalled_and_not_ready(
    health: HealthSubscriber, clock: Clock
) -> None:
    main, retry = loop_hooks(health), loop_hooks(health, "applier-0/retry")
    retry.polled()
    for _ in range(3):
        clock.now += MAX_AGE_S / 2
        main.polled()
    live = probes.live(health.snapshot(), MAX_AGE_S)
    assert (live.status, live.body["status"]) == (503, "stalled")
    ready = probes.ready(health.snapshot(), MAX_AGE_S)
    assert (ready.status, ready.body["status"]) == (503, "not_ready")
    assert ready.body["degradation_level"] == "L3"
    assert "stuck" in ready.body["reason"]


def test_every_loop_event_is_a_heartbeat(health: HealthSubscriber, clock: Clock) -> None:
    hooks = loop_hooks(health)
    fires = [
        lambda: hooks.consumed(1),
        lambda: hooks.batch_handled({("plans", 0, 1): "COMPLETED"}, 0.1),
        lambda: hooks.routed({("plans", 0, 2): "DEAD_LETTERED"}),
        lambda: hooks.committed({("plans", 0): 3}),
        lambda: hooks.rebalanced(assigned=frozenset({("plans", 0)})),
        lambda: hooks.breaker_changed("neo4j", "CLOSED", "OPEN"),
        hooks.polled,
    ]
    for fire in fires:
        clock.now += 10
        fire()
        assert probes.heartbeat_age_s(health.snapshot()) == 0


class Polls(LoopSubscriber):
    def __init__(self) -> None:
        self.events: list[Polled] = []

    def polled(self, event: Polled) -> None:
        self.events.append(event)


def test_the_polled_hook_fires_each_round_to_its_subscribers() -> None:
    polls = Polls()
    hooks = Hooks("planner-0", polls)
    hooks.polled()
    hooks.polled()
    assert polls.events == [Polled("planner-0"), Polled("planner-0")]
    Hooks("planner-0").polled()  # no subscriber: nothing to do, nothing fails
