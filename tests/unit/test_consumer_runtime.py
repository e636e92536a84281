"""The shared loop steps (``consumers.runtime``), offsets committing and the breakers of a loop,
on a fake consumer: pure logic, no Kafka."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest

from graph_ingest.consumers.breakers import Breakers
from graph_ingest.consumers.offsets import OffsetCommitter
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.consumers.runtime import RebalanceHooks, paused_wait, poll_timeout
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.hooks import (
    BreakerChanged,
    Committed,
    Hooks,
    LoopSubscriber,
    Rebalanced,
)
from graph_ingest.kafka.consumer import TypedConsumer
from graph_ingest.kafka.records import Partition
from graph_ingest.resilience.breaker import BreakerState


class FakeConsumer:
    """What the runtime asks of a TypedConsumer."""

    def __init__(self, due_in: float | None = None, owned: set[Partition] | None = None) -> None:
        self.due_in = due_in
        self.owned = owned or {("plans", 0), ("plans", 1)}
        self.paused = False
        self.commits: list[dict[Partition, int]] = []

    def next_due_in(self) -> float | None:
        return self.due_in

    def pause_all(self) -> None:
        self.paused = True

    def resume_all(self) -> None:
        self.paused = False

    def commit(self, offsets: Mapping[Partition, int]) -> dict[Partition, int]:
        owned = {tp: o for tp, o in offsets.items() if tp in self.owned}
        if owned:
            self.commits.append(owned)
        return owned


def as_consumer(fake: FakeConsumer) -> TypedConsumer[Any]:
    return cast(TypedConsumer[Any], fake)


class Recorder(LoopSubscriber):
    def __init__(self) -> None:
        self.events: list[object] = []

    def rebalanced(self, event: Rebalanced) -> None:
        self.events.append(event)

    def committed(self, event: Committed) -> None:
        self.events.append(event)

    def breaker_changed(self, event: BreakerChanged) -> None:
        self.events.append(event)


def message(partition: int, offset: int) -> PlanMessage:
    return PlanMessage(topic="plans", partition=partition, offset=offset, key=None, value=b"x")


@pytest.mark.parametrize(
    ("due_in", "expected"), [(None, 1.0), (5.0, 1.0), (0.25, 0.25), (0.0, 0.001), (-3.0, 0.001)]
)
def test_a_poll_wakes_up_when_a_held_partition_falls_due(
    due_in: float | None, expected: float
) -> None:
    assert poll_timeout(as_consumer(FakeConsumer(due_in)), 1.0) == expected


def test_a_paused_wait_ends_when_its_condition_holds_and_resumes_the_partitions() -> None:
    consumer = FakeConsumer()
    rounds: list[str] = []
    answers = iter([False, False, True])

    def until() -> bool:
        rounds.append("until")
        assert consumer.paused
        return next(answers)

    waited = paused_wait(
        as_consumer(consumer),
        threading.Event(),
        poll=lambda timeout: rounds.append(f"poll {timeout}"),
        watch=lambda: rounds.append("watch"),
        until=until,
    )
    assert waited is True
    assert not consumer.paused
    assert rounds == ["watch", "until", "poll 0.5"] * 2 + ["watch", "until"]


def test_a_paused_wait_ends_after_its_timeout_polling_no_longer_than_what_is_left() -> None:
    polls: list[float] = []
    waited = paused_wait(
        as_consumer(FakeConsumer()), threading.Event(), poll=polls.append, timeout_s=0.05
    )
    assert waited is True
    assert polls and all(timeout <= 0.05 for timeout in polls)


def test_a_stop_ends_a_paused_wait_with_false_and_resumes_the_partitions() -> None:
    consumer, stop = FakeConsumer(), threading.Event()
    waited = paused_wait(as_consumer(consumer), stop, poll=lambda _t: stop.set())
    assert waited is False
    assert not consumer.paused


def test_a_rebalance_reaches_the_worker_first_then_the_hooks() -> None:
    seen: list[object] = []
    recorder = Recorder()
    recorder.events = seen
    rebalances = RebalanceHooks(Hooks("w1", recorder), lambda revoked: seen.append(revoked))
    rebalances.assigned(frozenset({("plans", 2)}))
    rebalances.revoked({("plans", 0)})
    assert seen == [
        Rebalanced("w1", assigned=frozenset({("plans", 2)})),
        {("plans", 0)},
        Rebalanced("w1", revoked=frozenset({("plans", 0)})),
    ]


def test_offsets_are_committed_once_per_move_and_only_for_owned_partitions() -> None:
    # Given a consumer owning partition 0 only, and messages of partitions 0 and 1 consumed
    consumer, recorder = FakeConsumer(owned={("plans", 0)}), Recorder()
    committer = OffsetCommitter(as_consumer(consumer), Hooks("w1", recorder))
    first, second, other = message(0, 10), message(0, 11), message(1, 5)
    committer.tracker.consumed([first, second, other])
    # When the first is done, and the commit is asked twice
    committer.tracker.done([first, other])
    committer.commit()
    committer.commit()
    # Then partition 0 is committed up to the message still in flight, once, and the hooks hear it
    assert consumer.commits == [{("plans", 0): 11}]
    assert recorder.events == [Committed("w1", {("plans", 0): 11})]


def test_a_revoked_partition_is_committed_then_forgotten() -> None:
    consumer = FakeConsumer(owned={("plans", 0)})
    committer = OffsetCommitter(as_consumer(consumer), Hooks("w1"))
    done = message(0, 3)
    committer.tracker.consumed([done])
    committer.tracker.done([done])
    committer.revoked({("plans", 0)})
    assert consumer.commits == [{("plans", 0): 4}]
    assert committer.tracker.committable() == {}


def unavailable(dependency: str) -> GraphIngestError:
    error = GraphIngestError("down", code=StatusCode.UNAVAILABLE)
    error.dependency = dependency
    return error


def test_breakers_open_on_outages_of_their_dependency_and_tell_the_hooks() -> None:
    recorder = Recorder()
    breakers = Breakers(
        ["neo4j", "postgres"],
        failure_threshold=2,
        probe_interval_s=0.001,
        hooks=Hooks("w", recorder),
    )
    exc = unavailable("neo4j")
    # A failure that is no outage, or of no known dependency, has no breaker
    assert breakers.failed(exc, StatusCode.INVALID_ARGUMENT) is None
    assert breakers.failed(unavailable("kafka"), StatusCode.UNAVAILABLE) is None
    # Two outages of neo4j open its breaker
    breakers.failed(exc, StatusCode.UNAVAILABLE)
    breaker = breakers.failed(exc, StatusCode.UNAVAILABLE)
    assert breaker is not None and breaker.state is BreakerState.OPEN
    assert breakers.states() == {"neo4j": BreakerState.OPEN, "postgres": BreakerState.CLOSED}
    # A probe that answers half-opens it; a batch that goes through closes it
    breaker._last_probe_at = float("-inf")  # the probe interval has passed
    assert breakers.answers(breaker, lambda _name: None)
    breakers.close_all()
    assert recorder.events == [
        BreakerChanged("w", "neo4j", "CLOSED", "OPEN"),
        BreakerChanged("w", "neo4j", "OPEN", "HALF_OPEN"),
        BreakerChanged("w", "neo4j", "HALF_OPEN", "CLOSED"),
    ]


def test_a_probe_that_fails_keeps_the_breaker_open() -> None:
    breakers = Breakers(["neo4j"], failure_threshold=1, probe_interval_s=0.001, hooks=Hooks("w"))
    breaker = breakers.failed(unavailable("neo4j"), StatusCode.UNAVAILABLE)
    assert breaker is not None
    breaker._last_probe_at = float("-inf")

    def refuse(_name: str) -> None:
        raise unavailable("neo4j")

    assert not breakers.answers(breaker, refuse)
    assert breaker.state is BreakerState.OPEN
