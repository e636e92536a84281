"""Lifecycle hooks: subscribers see each event once, with what it says; no subscriber, no work."""

from __future__ import annotations

from typing import Any

import pytest

from graph_ingest.hooks import (
    BatchHandled,
    BreakerChanged,
    Committed,
    Consumed,
    Hooks,
    LoopSubscriber,
    Rebalanced,
    Routed,
)


class Recorder(LoopSubscriber):
    def __init__(self) -> None:
        self.events: list[object] = []

    def consumed(self, event: Consumed) -> None:
        self.events.append(event)

    def batch_handled(self, event: BatchHandled) -> None:
        self.events.append(event)

    def routed(self, event: Routed) -> None:
        self.events.append(event)

    def breaker_changed(self, event: BreakerChanged) -> None:
        self.events.append(event)

    def rebalanced(self, event: Rebalanced) -> None:
        self.events.append(event)

    def committed(self, event: Committed) -> None:
        self.events.append(event)


def fire_one_of_each(hooks: Hooks) -> None:
    hooks.consumed(3)
    hooks.batch_handled({("plans", 0, 7): "COMPLETED"}, 0.25, attempts=2)
    hooks.routed({("plans", 0, 8): "DEAD_LETTERED"})
    hooks.breaker_changed("neo4j", "CLOSED", "OPEN")
    hooks.rebalanced(assigned=frozenset({("plans", 1)}))
    hooks.rebalanced(revoked=frozenset({("plans", 0)}))
    hooks.committed({("plans", 0): 9})


def test_every_subscriber_sees_every_event_in_order() -> None:
    # Given two subscribers, one of them added later
    first, second = Recorder(), Recorder()
    hooks = Hooks("w1", first)
    hooks.subscribe(second)
    # When the loop fires one event of each kind
    fire_one_of_each(hooks)
    # Then both saw the same events, each naming the worker
    expected = [
        Consumed("w1", 3),
        BatchHandled("w1", {("plans", 0, 7): "COMPLETED"}, 0.25, 2),
        Routed("w1", {("plans", 0, 8): "DEAD_LETTERED"}),
        BreakerChanged("w1", "neo4j", "CLOSED", "OPEN"),
        Rebalanced("w1", assigned=frozenset({("plans", 1)})),
        Rebalanced("w1", revoked=frozenset({("plans", 0)})),
        Committed("w1", {("plans", 0): 9}),
    ]
    assert first.events == expected
    assert second.events == expected


def test_events_that_say_nothing_are_not_fired() -> None:
    recorder = Recorder()
    hooks = Hooks("w1", recorder)
    hooks.consumed(0)
    hooks.routed({})
    hooks.breaker_changed("neo4j", "OPEN", "OPEN")
    hooks.rebalanced()
    hooks.committed({})
    assert recorder.events == []


def test_a_subscriber_overrides_only_what_it_watches() -> None:
    class Commits(LoopSubscriber):
        def __init__(self) -> None:
            self.offsets: list[dict[tuple[str, int], int]] = []

        def committed(self, event: Committed) -> None:
            self.offsets.append(dict(event.offsets))

    commits = Commits()
    fire_one_of_each(Hooks("w1", commits))
    assert commits.offsets == [{("plans", 0): 9}]


def test_with_no_subscriber_no_event_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    # Building an event is the only cost a hook could add: with no subscriber there is none.
    import graph_ingest.hooks as hooks_module

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("an event was built with no subscriber")

    for name in ("Consumed", "BatchHandled", "Routed", "BreakerChanged", "Rebalanced", "Committed"):
        monkeypatch.setattr(hooks_module, name, refuse)
    fire_one_of_each(Hooks("w1"))


def test_the_metrics_events_are_not_built_with_no_subscriber(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import graph_ingest.hooks as hooks_module

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("an event was built with no subscriber")

    names = (
        "StepsTimed",
        "RetriedInPlace",
        "RetriesDelivered",
        "PlansCompleted",
        "RoutesTaken",
        "Degraded",
        "Published",
        "Purged",
        "Polled",
    )
    for name in names:
        monkeypatch.setattr(hooks_module, name, refuse)
    hooks = Hooks("w1")
    hooks.steps_timed({"admit": 0.1})
    hooks.retried_in_place("deadlock")
    hooks.retries_delivered([("1s", 0.2)])
    hooks.plans_completed([0.5])
    hooks.routes_taken({"1s": 1}, {"INTERNAL": 1})
    hooks.degraded(1)
    hooks.published({"completed": 1}, [0.1])
    hooks.purged(5, False)
    hooks.polled()


def test_empty_metrics_events_are_not_fired() -> None:
    fired: list[object] = []

    class Watcher(LoopSubscriber):
        def steps_timed(self, event: object) -> None:
            fired.append(event)

        def retries_delivered(self, event: object) -> None:
            fired.append(event)

        def plans_completed(self, event: object) -> None:
            fired.append(event)

        def routes_taken(self, event: object) -> None:
            fired.append(event)

        def published(self, event: object) -> None:
            fired.append(event)

    hooks = Hooks("w1", Watcher())
    hooks.steps_timed({})
    hooks.retries_delivered([])
    hooks.plans_completed([])
    hooks.routes_taken({}, {})
    hooks.published({}, [])
    assert fired == []
