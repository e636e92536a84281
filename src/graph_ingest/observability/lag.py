"""Consumer lag per partition, in offsets and in seconds, computed by us at scrape time from each
group's committed offsets, the high watermarks and the Kafka timestamp of the message at the
committed offset (``kafka.group_positions``) — not from librdkafka's statistics, whose lag freezes
on a paused partition, and this pipeline pauses partitions by design (an open breaker, a retry
tier holding its head).

* ``graph_ingest_consumer_lag_offsets{group,topic,partition}``: high watermark minus the group's
  committed offset (the low watermark when it never committed); 0 when nothing deliverable waits
  (caught up, or only transaction markers left);
* ``graph_ingest_consumer_lag_seconds{group,topic,partition}``: now minus the timestamp of the
  first message the group has not consumed; 0 when nothing waits;
* ``graph_ingest_consumer_lag_errors_total{group}``: reads of a group's lag that failed (Kafka
  away, out of time); the group's lag series are absent until a read succeeds again.

A :class:`GroupLag` reads one group (cached ``cache_s``, bounded by ``timeout_s``); a
:class:`ConsumerLag` is the collector over the groups of a process, read in parallel so a scrape
takes at most about ``timeout_s`` whatever Kafka does. :func:`consumer_lag` builds it for a kind
of worker (its own groups) or for all groups at once (the API: lag stays visible when every
worker of a group is down).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_ingest.kafka.group_positions import GroupPositions, PartitionPosition
from graph_ingest.observability.families import Kind
from graph_ingest.observability.scrape_cache import ScrapeCache
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import KafkaSettings

LABELS = ["group", "topic", "partition"]


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    offsets: int
    seconds: float


def lag_of(position: PartitionPosition, *, now: float) -> PartitionLag:
    """The lag of one partition, ``now`` a unix time."""
    waiting_since = position.waiting_since
    if waiting_since is None or position.start >= position.high:
        return PartitionLag(position.topic, position.partition, 0, 0.0)
    return PartitionLag(
        position.topic,
        position.partition,
        position.high - position.start,
        max(now - waiting_since, 0.0),
    )


class Positions(Protocol):
    """Where one consumer group stands (``kafka.group_positions.GroupPositions``)."""

    @property
    def group(self) -> str: ...

    def read(self, timeout_s: float) -> list[PartitionPosition]: ...

    def close(self) -> None: ...


class GroupLag:
    """One consumer group's lag over its topics (``positions``: where it stands, read within
    ``timeout_s``). Constructing it touches nothing; ``close`` when the process stops."""

    def __init__(
        self,
        positions: Positions,
        *,
        cache_s: float = 5.0,
        timeout_s: float = 3.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.group = positions.group
        self.timeout_s = timeout_s
        self._positions = positions
        self._clock = clock
        self._cache = ScrapeCache(
            self._read, max_age_s=cache_s, what=f"the lag of group {self.group}"
        )

    @classmethod
    def of(
        cls,
        kafka: KafkaSettings,
        group: str,
        topics: Sequence[str],
        *,
        cache_s: float = 5.0,
        timeout_s: float = 3.0,
    ) -> GroupLag:
        """The lag of ``group`` over ``topics`` on the cluster of ``kafka``."""
        positions = GroupPositions(kafka, group, topics)
        return cls(positions, cache_s=cache_s, timeout_s=timeout_s)

    def lags(self) -> list[PartitionLag] | None:
        """Every partition's lag, as last read (read again when older than ``cache_s``); None
        when the last read failed."""
        return self._cache.get()

    @property
    def errors(self) -> int:
        """Reads that failed since the process started."""
        return self._cache.errors

    def close(self) -> None:
        self._positions.close()

    def _read(self) -> list[PartitionLag]:
        positions = self._positions.read(self.timeout_s)
        now = self._clock()
        return [lag_of(position, now=now) for position in positions]


class ConsumerLag(Collector):
    """The prometheus_client collector of the lag of ``groups`` (one family per metric, however
    many groups: register one ``ConsumerLag`` per registry)."""

    def __init__(self, groups: Sequence[GroupLag]) -> None:
        self.groups = list(groups)
        self._pool = ThreadPoolExecutor(
            max_workers=max(len(self.groups), 1), thread_name_prefix="consumer-lag"
        )
        self._closing = threading.Lock()
        self._closed = False

    def describe(self) -> Iterable[Metric]:
        return _families()

    def collect(self) -> Iterable[Metric]:
        offsets, seconds, errors = _families()
        wait_s = max((g.timeout_s for g in self.groups), default=0) + 1.0
        deadline = time.monotonic() + wait_s
        reads = [(group, self._submit(group)) for group in self.groups]
        for group, future in reads:
            try:
                lags = (
                    future.result(timeout=max(deadline - time.monotonic(), 0)) if future else None
                )
            except FutureTimeout:  # a client call past its own timeout: answer without it
                lags = None
            for lag in lags or ():
                labels = [group.group, lag.topic, str(lag.partition)]
                offsets.add_metric(labels, lag.offsets)
                seconds.add_metric(labels, lag.seconds)
            errors.add_metric([group.group], group.errors)
        return [offsets, seconds, errors]

    def close(self) -> None:
        """Stop reading (a scrape afterwards shows only the error counts) and close the
        groups' consumers."""
        with self._closing:
            self._closed = True
        self._pool.shutdown(wait=True)
        for group in self.groups:
            group.close()

    def _submit(self, group: GroupLag) -> Future[list[PartitionLag] | None] | None:
        with self._closing:
            return None if self._closed else self._pool.submit(group.lags)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily]:
    return (
        GaugeMetricFamily(
            "graph_ingest_consumer_lag_offsets",
            "Messages a consumer group has not consumed yet, per partition (high watermark minus"
            " committed offset; 0 when only transaction markers are left)",
            labels=LABELS,
        ),
        GaugeMetricFamily(
            "graph_ingest_consumer_lag_seconds",
            "How long the first message a consumer group has not consumed has waited, per"
            " partition (from its Kafka timestamp; 0 when nothing waits), paused partitions"
            " included",
            labels=LABELS,
        ),
        CounterMetricFamily(
            "graph_ingest_consumer_lag_errors",
            "Reads of a consumer group's lag that failed (its lag series are absent meanwhile)",
            labels=["group"],
        ),
    )


def consumer_groups(settings: Settings, kind: Kind) -> dict[str, list[str]]:
    """The consumer groups a kind of process consumes in, each with its topics; the API's:
    every group (a worker kind without one, the relay, has none)."""
    topics = settings.topics
    tiers = [topic for topic, _ in topics.retry_tiers]
    by_kind: dict[str, dict[str, list[str]]] = {
        "applier": {
            settings.applier.group_id: [topics.plans],
            **({settings.applier.retry_group_id: tiers} if tiers else {}),
        },
        "planner": {
            settings.planner.group_id: [topics.requests],
            settings.planner.conflicts_group_id: [topics.operations],
        },
        "projector": {settings.projector.group_id: list(topics.projected)},
        "relay": {},
    }
    if kind == "api":
        return {group: t for groups in by_kind.values() for group, t in groups.items()}
    return by_kind[kind]


def consumer_lag(settings: Settings, kind: Kind) -> ConsumerLag:
    """The lag collector of a kind of process (``"api"``: every group), cached and bounded by
    ``GRAPH_INGEST_SCRAPE__CACHE_S`` and ``__TIMEOUT_S``."""
    scrape = settings.scrape
    return ConsumerLag(
        [
            GroupLag.of(
                settings.kafka, group, topics, cache_s=scrape.cache_s, timeout_s=scrape.timeout_s
            )
            for group, topics in consumer_groups(settings, kind).items()
        ]
    )


__all__ = [
    "ConsumerLag",
    "GroupLag",
    "PartitionLag",
    "consumer_groups",
    "consumer_lag",
    "lag_of",
]
