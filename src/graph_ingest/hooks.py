"""Lifecycle hooks: what a worker's loop tells whoever watches it (metrics, health, telemetry),
so that watching is a subscription and never a call inside a handler (Dramatiq's middleware).

A subscriber subclasses :class:`LoopSubscriber` and overrides the events it wants; a worker
fires them through its :class:`Hooks`. Events fire per poll or per batch, never per message,
and carry counts and outcomes by position rather than the messages, so the hot path stays lean:
with no subscriber each firing is one test of an empty tuple and builds nothing. A subscriber
runs on the worker's thread, inside its loop: it must be quick and must not raise (what it
raises ends the worker, as any bug in the loop does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graph_ingest.domain.breaker_control import BreakerControl
from graph_ingest.kafka.records import Partition, Position

RELAY_PREFIX = "relay/"


def relay_loop(schema: str) -> str:
    """The name an outbox relay's hooks go by: ``relay/<schema>`` (no consuming loop's)."""
    return f"{RELAY_PREFIX}{schema}"


@dataclass(frozen=True, slots=True)
class Polled:
    """A poll round ended, whether or not it delivered anything: the loop is turning (the one
    event an idle worker fires, so a heartbeat can tell idle from stuck)."""

    worker: str


@dataclass(frozen=True, slots=True)
class Consumed:
    """A poll delivered ``messages`` decoded messages to the worker."""

    worker: str
    messages: int


@dataclass(frozen=True, slots=True)
class BatchHandled:
    """A batch has durable outcomes (the applier's ``Outcome``, the planner's ``PLANNED`` /
    ``DEAD_LETTERED`` / ``DROPPED``), after ``attempts`` tries that took ``duration_s`` in all."""

    worker: str
    outcomes: Mapping[Position, str]
    duration_s: float
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class Routed:
    """Plans of a batch left for a retry tier or the DLQ: the outcome of each, by position."""

    worker: str
    routes: Mapping[Position, str]


@dataclass(frozen=True, slots=True)
class BreakerChanged:
    """The circuit breaker of ``dependency`` went from ``previous`` to ``state``."""

    worker: str
    dependency: str
    previous: str
    state: str


@dataclass(frozen=True, slots=True)
class BreakerForced:
    """An operator's word on ``dependency``'s breaker (``control``; None: never forced) as the
    loop now obeys it; fired for every breaker when the loop first reads the word."""

    worker: str
    dependency: str
    control: BreakerControl | None


@dataclass(frozen=True, slots=True)
class Rebalanced:
    """The group gave the worker ``assigned`` partitions, or took ``revoked`` ones away."""

    worker: str
    assigned: frozenset[Partition] = frozenset()
    revoked: frozenset[Partition] = frozenset()


@dataclass(frozen=True, slots=True)
class Committed:
    """Offsets committed (the next offset to read, per partition) with the outcomes before them."""

    worker: str
    offsets: Mapping[Partition, int]


@dataclass(frozen=True, slots=True)
class StepsTimed:
    """The applier ran its steps over a batch (or a part of it, split to isolate a failure):
    seconds per step (``admit``, ``graph_write``, ``state_commit``), those that ran."""

    worker: str
    durations: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class RetriedInPlace:
    """A batch failed and is tried again in place; ``reason``: the failure's status code in lower
    case, or what it was more precisely (``deadlock``, ``lock_wait``: ``resilience.classify``)."""

    worker: str
    reason: str


@dataclass(frozen=True, slots=True)
class RetriesDelivered:
    """A poll delivered retry-tier copies: per copy, its tier and how late it came (delivered at
    minus the due time its retry headers carry; negative when early)."""

    worker: str
    lateness: Sequence[tuple[str, float]]


@dataclass(frozen=True, slots=True)
class PlansCompleted:
    """Plans of a batch reached COMPLETED: per plan, seconds from its message's timestamp (when
    it was published) to the commit."""

    worker: str
    latencies: Sequence[float]


@dataclass(frozen=True, slots=True)
class RoutesTaken:
    """What a batch's routing wrote: copies per retry tier (by its delay, ``1s``), and DLQ
    entries per error code (plans that followed a dead-lettered one included)."""

    worker: str
    tiers: Mapping[str, int]
    dead_letters: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Degraded:
    """The loop's degradation level changed to ``level`` (0..3, ``L0``..``L3``)."""

    worker: str
    level: int


@dataclass(frozen=True, slots=True)
class Published:
    """The outbox relay published rows: operation events per stage (lower case), and per row
    seconds from its creation to Kafka's acknowledgement."""

    worker: str
    stages: Mapping[str, int]
    latencies: Sequence[float]


@dataclass(frozen=True, slots=True)
class Purged:
    """The active relay deleted ``rows`` outbox rows past their retention, or its try failed."""

    worker: str
    rows: int
    failed: bool


class LoopSubscriber:
    """Override the events to watch; the others do nothing."""

    def polled(self, event: Polled) -> None:
        """A poll round ended (idle or not)."""

    def consumed(self, event: Consumed) -> None:
        """A poll delivered messages."""

    def batch_handled(self, event: BatchHandled) -> None:
        """A batch has durable outcomes."""

    def routed(self, event: Routed) -> None:
        """Plans were routed to a retry tier or the DLQ."""

    def breaker_changed(self, event: BreakerChanged) -> None:
        """A dependency's circuit breaker changed state."""

    def breaker_forced(self, event: BreakerForced) -> None:
        """An operator forced a breaker, or released it."""

    def rebalanced(self, event: Rebalanced) -> None:
        """Partitions were assigned or revoked."""

    def committed(self, event: Committed) -> None:
        """Offsets were committed."""

    def steps_timed(self, event: StepsTimed) -> None:
        """The applier's steps ran over a batch."""

    def retried_in_place(self, event: RetriedInPlace) -> None:
        """A batch is tried again in place."""

    def retries_delivered(self, event: RetriesDelivered) -> None:
        """Retry-tier copies were delivered."""

    def plans_completed(self, event: PlansCompleted) -> None:
        """Plans reached COMPLETED."""

    def routes_taken(self, event: RoutesTaken) -> None:
        """Routing wrote tier copies or DLQ entries."""

    def degraded(self, event: Degraded) -> None:
        """The degradation level changed."""

    def published(self, event: Published) -> None:
        """The outbox relay published rows."""

    def purged(self, event: Purged) -> None:
        """The outbox relay deleted published rows past their retention, or failed to."""


class Hooks:
    """The subscribers of one worker, and the events it fires to them."""

    __slots__ = ("subscribers", "worker")

    def __init__(self, worker: str, *subscribers: LoopSubscriber) -> None:
        self.worker = worker
        self.subscribers: tuple[LoopSubscriber, ...] = subscribers

    def subscribe(self, subscriber: LoopSubscriber) -> None:
        self.subscribers = (*self.subscribers, subscriber)

    def polled(self) -> None:
        if self.subscribers:
            event = Polled(self.worker)
            for subscriber in self.subscribers:
                subscriber.polled(event)

    def consumed(self, messages: int) -> None:
        if self.subscribers and messages:
            event = Consumed(self.worker, messages)
            for subscriber in self.subscribers:
                subscriber.consumed(event)

    def batch_handled(
        self, outcomes: Mapping[Position, str], duration_s: float, attempts: int = 1
    ) -> None:
        if self.subscribers:
            event = BatchHandled(self.worker, outcomes, duration_s, attempts)
            for subscriber in self.subscribers:
                subscriber.batch_handled(event)

    def routed(self, routes: Mapping[Position, str]) -> None:
        if self.subscribers and routes:
            event = Routed(self.worker, routes)
            for subscriber in self.subscribers:
                subscriber.routed(event)

    def breaker_changed(self, dependency: str, previous: str, state: str) -> None:
        if self.subscribers and previous != state:
            event = BreakerChanged(self.worker, dependency, previous, state)
            for subscriber in self.subscribers:
                subscriber.breaker_changed(event)

    def breaker_forced(self, dependency: str, control: BreakerControl | None) -> None:
        if self.subscribers:
            event = BreakerForced(self.worker, dependency, control)
            for subscriber in self.subscribers:
                subscriber.breaker_forced(event)

    def rebalanced(
        self,
        *,
        assigned: frozenset[Partition] = frozenset(),
        revoked: frozenset[Partition] = frozenset(),
    ) -> None:
        if self.subscribers and (assigned or revoked):
            event = Rebalanced(self.worker, assigned, revoked)
            for subscriber in self.subscribers:
                subscriber.rebalanced(event)

    def committed(self, offsets: Mapping[Partition, int]) -> None:
        if self.subscribers and offsets:
            event = Committed(self.worker, offsets)
            for subscriber in self.subscribers:
                subscriber.committed(event)

    def steps_timed(self, durations: Mapping[str, float]) -> None:
        if self.subscribers and durations:
            event = StepsTimed(self.worker, durations)
            for subscriber in self.subscribers:
                subscriber.steps_timed(event)

    def retried_in_place(self, reason: str) -> None:
        if self.subscribers:
            event = RetriedInPlace(self.worker, reason)
            for subscriber in self.subscribers:
                subscriber.retried_in_place(event)

    def retries_delivered(self, lateness: Sequence[tuple[str, float]]) -> None:
        if self.subscribers and lateness:
            event = RetriesDelivered(self.worker, lateness)
            for subscriber in self.subscribers:
                subscriber.retries_delivered(event)

    def plans_completed(self, latencies: Sequence[float]) -> None:
        if self.subscribers and latencies:
            event = PlansCompleted(self.worker, latencies)
            for subscriber in self.subscribers:
                subscriber.plans_completed(event)

    def routes_taken(self, tiers: Mapping[str, int], dead_letters: Mapping[str, int]) -> None:
        if self.subscribers and (tiers or dead_letters):
            event = RoutesTaken(self.worker, tiers, dead_letters)
            for subscriber in self.subscribers:
                subscriber.routes_taken(event)

    def degraded(self, level: int) -> None:
        if self.subscribers:
            event = Degraded(self.worker, level)
            for subscriber in self.subscribers:
                subscriber.degraded(event)

    def published(self, stages: Mapping[str, int], latencies: Sequence[float]) -> None:
        if self.subscribers and (stages or latencies):
            event = Published(self.worker, stages, latencies)
            for subscriber in self.subscribers:
                subscriber.published(event)

    def purged(self, rows: int, failed: bool) -> None:
        if self.subscribers and (rows or failed):
            event = Purged(self.worker, rows, failed)
            for subscriber in self.subscribers:
                subscriber.purged(event)


__all__ = [
    "RELAY_PREFIX",
    "BatchHandled",
    "BreakerChanged",
    "BreakerForced",
    "Committed",
    "Consumed",
    "Degraded",
    "Hooks",
    "LoopSubscriber",
    "PlansCompleted",
    "Polled",
    "Published",
    "Purged",
    "Rebalanced",
    "RetriedInPlace",
    "RetriesDelivered",
    "Routed",
    "RoutesTaken",
    "StepsTimed",
    "relay_loop",
]
