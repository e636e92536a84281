"""What every worker's Kafka loop does the same way: when to wake up, how to wait with its
partitions paused, and how rebalances reach its hooks.

A worker keeps what is its own (what a batch is, how its outcomes become durable); the shared
steps are here, so the applier and the planner loop alike: a poll waits no longer than the
earliest held partition needs (``kafka.consumer`` holds a partition until its head is due); a
wait for a retry keeps every owned partition paused (new ones too) and keeps polling, so the
worker stays in its group and sees rebalances; a partition assigned or revoked is fired to the
hooks after the worker's own bookkeeping.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from graph_ingest.hooks import Hooks
from graph_ingest.kafka.consumer import TypedConsumer
from graph_ingest.kafka.records import Partition

_PAUSED_POLL_S = 0.5
"""The longest a paused wait polls at once: how soon it sees ``stop`` or its condition."""


def poll_timeout(consumer: TypedConsumer[Any], timeout_s: float) -> float:
    """``timeout_s``, shortened to wake up when the consumer's earliest held partition is due."""
    due_in = consumer.next_due_in()
    if due_in is None:
        return timeout_s
    return min(timeout_s, max(due_in, 0.001))


def collect_young_garbage(at_least: int) -> None:
    """Collect the young generation now if it holds at least ``at_least`` objects (0: never).
    For a worker about to wait for input: the collection's pause falls there, not on a message
    (``GcSettings.idle_collect_min``)."""
    if at_least and gc.get_count()[0] >= at_least:
        gc.collect(0)


def paused_wait(
    consumer: TypedConsumer[Any],
    stop: threading.Event,
    *,
    poll: Callable[[float], None],
    watch: Callable[[], None] = lambda: None,
    timeout_s: float | None = None,
    until: Callable[[], bool] = lambda: False,
) -> bool:
    """Wait with every owned partition paused until ``timeout_s`` passed or ``until()`` holds,
    calling ``watch()`` first on every round (the worker watches its health) and
    ``poll(timeout)`` between rounds (it keeps what still arrives); False if ``stop`` was set
    first. The partitions are resumed however it ends."""
    consumer.pause_all()
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not stop.is_set():
            watch()
            if until():
                return True
            remaining = _PAUSED_POLL_S if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return True
            poll(min(remaining, _PAUSED_POLL_S))
        return False
    finally:
        consumer.resume_all()


class RebalanceHooks:
    """A worker's rebalance callbacks for its consumer: its own ``on_revoke`` first (while the
    partitions are still owned), then the hooks."""

    def __init__(self, hooks: Hooks, on_revoke: Callable[[set[Partition]], None]) -> None:
        self._hooks = hooks
        self._on_revoke = on_revoke

    def assigned(self, partitions: frozenset[Partition]) -> None:
        self._hooks.rebalanced(assigned=partitions)

    def revoked(self, partitions: set[Partition]) -> None:
        self._on_revoke(partitions)
        self._hooks.rebalanced(revoked=frozenset(partitions))


__all__ = ["RebalanceHooks", "paused_wait", "poll_timeout"]
