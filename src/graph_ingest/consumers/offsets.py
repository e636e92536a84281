"""Offsets: per partition, the offset up to which every consumed message has a durable outcome,
and committing it.

A worker that commits offsets itself (the applier; the planner commits its own in its Kafka
transaction) marks what it consumed and what became durable in an :class:`OffsetTracker`, and
commits with an :class:`OffsetCommitter` after each batch, when a partition is revoked and when it
leaves: only offsets that moved, only of partitions still owned. A revoked partition's
uncommitted messages go to its next owner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.hooks import Hooks
from graph_ingest.kafka.consumer import TypedConsumer
from graph_ingest.kafka.records import Partition


class OffsetTracker:
    """Per partition, the offset up to which every consumed message has a durable outcome."""

    def __init__(self) -> None:
        self._in_flight: dict[tuple[str, int], set[int]] = {}
        self._highest_seen: dict[tuple[str, int], int] = {}

    def consumed(self, messages: Iterable[PlanMessage]) -> None:
        for m in messages:
            tp = (m.topic, m.partition)
            self._in_flight.setdefault(tp, set()).add(m.offset)
            self._highest_seen[tp] = max(self._highest_seen.get(tp, -1), m.offset)

    def done(self, messages: Iterable[PlanMessage]) -> None:
        for m in messages:
            self._in_flight.get((m.topic, m.partition), set()).discard(m.offset)

    def committable(self) -> dict[tuple[str, int], int]:
        """Next offset to commit per partition (Kafka commits the offset of the next message)."""
        positions = {}
        for tp, highest in self._highest_seen.items():
            in_flight = self._in_flight.get(tp)
            positions[tp] = min(in_flight) if in_flight else highest + 1
        return positions

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop revoked partitions: their uncommitted messages go to the next owner."""
        for tp in partitions:
            self._in_flight.pop(tp, None)
            self._highest_seen.pop(tp, None)


class OffsetCommitter:
    """Commits what an :class:`OffsetTracker` says is durable, and tells the hooks."""

    def __init__(self, consumer: TypedConsumer[Any], hooks: Hooks) -> None:
        self.tracker = OffsetTracker()
        self._consumer = consumer
        self._hooks = hooks
        self._committed: dict[Partition, int] = {}

    def commit(self) -> None:
        """Commit every partition whose committable offset moved since its last commit."""
        offsets = {
            tp: offset
            for tp, offset in self.tracker.committable().items()
            if self._committed.get(tp) != offset
        }
        committed = self._consumer.commit(offsets)
        self._committed.update(committed)
        self._hooks.committed(committed)

    def revoked(self, partitions: Iterable[Partition]) -> None:
        """Commit what is done, then forget ``partitions`` (still owned while this runs)."""
        self.commit()
        partitions = list(partitions)
        self.tracker.forget(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)


__all__ = ["OffsetCommitter", "OffsetTracker"]
