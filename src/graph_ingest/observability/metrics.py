"""The pipeline's Prometheus metrics, on an injectable ``CollectorRegistry``: a
:class:`~graph_ingest.hooks.LoopSubscriber` that turns what the loops tell their hooks
into samples (Dramatiq's Prometheus middleware), so that no handler calls a metric.

One :class:`PipelineMetrics` per process, subscribed to every loop of it (an applier's two loops
and the relay beside them share one); ``kind`` says which of the pipeline's metrics it has
(``applier``, ``planner``, ``projector``, ``relay``, ``api``). Every label value known in advance
is created at start, so that a counter reads 0 before its first event instead of being absent.
The loops run on threads of their own: what is aggregated over loops (partitions held, the worst
breaker, the highest degradation level) sits behind one lock.

Names and labels follow the issue 19 catalogue (``graph_ingest_`` prefix, base units, no ids in
labels but the info metric's). Gauges read at scrape time (consumer lag, the store's gauges, the
projection's lag) are collectors of their own (``observability.lag``, ``observability.store_gauges``,
``observability.projection_metrics``), registered on the same registry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry

from graph_ingest.domain.breaker_control import KNOWN_DEPENDENCIES
from graph_ingest.hooks import (
    RELAY_PREFIX,
    BatchHandled,
    BreakerChanged,
    BreakerForced,
    Degraded,
    LoopSubscriber,
    PlansCompleted,
    Polled,
    Published,
    Purged,
    Rebalanced,
    RetriedInPlace,
    RetriesDelivered,
    RoutesTaken,
    StepsTimed,
)
from graph_ingest.kafka.records import Partition
from graph_ingest.observability.families import (
    BREAKER_STATES,
    FORCED_MODES,
    OUTCOMES,
    ApplierFamilies,
    Kind,
    LoopFamilies,
    RelayFamilies,
    heartbeat,
    worker_info,
)
from graph_ingest.observability.projection_metrics import ProjectionMetrics
from graph_ingest.planning.metrics import PlanningMetrics

_SEVERITY = {"closed": 0, "half_open": 1, "open": 2}
"""closed < half_open < open: a process shows a dependency's worst breaker over its loops."""


class PipelineMetrics(LoopSubscriber):
    """The metrics of one process of ``kind``, fed by its loops' hooks (subscribe it to each).

    ``topics``: the topics its loops consume (their label values, created at 0); ``tiers``: the
    retry tiers by delay (``1s``); ``relay``: an outbox relay runs in the process."""

    def __init__(
        self,
        registry: CollectorRegistry,
        kind: Kind,
        *,
        worker_id: str,
        group: str = "",
        protocol: str = "",
        topics: Sequence[str] = (),
        tiers: Sequence[str] = (),
        dependencies: Sequence[str] = KNOWN_DEPENDENCIES,
        relay: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self.kind = kind
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, set[Partition]] = {}
        self._breakers: dict[tuple[str, str], str] = {}
        self._levels: dict[str, int] = {}
        worker_info(registry, kind, worker_id=worker_id, group=group, protocol=protocol)
        consuming, relay = kind in OUTCOMES, relay or kind == "relay"
        self._heartbeat = heartbeat(registry) if consuming or relay else None
        self._loops = LoopFamilies(registry, kind, topics) if consuming else None
        self._applier = (
            ApplierFamilies(registry, tiers, dependencies) if kind == "applier" else None
        )
        self._relay = RelayFamilies(registry) if relay else None
        self.planning = PlanningMetrics(registry) if kind == "planner" else None
        """The planner's extraction-issue counter (``build_planner(metrics=...)``)."""

    # -- every loop ------------------------------------------------------------------------

    def polled(self, event: Polled) -> None:
        """The heartbeat: a consuming loop's round (a relay beside them does not beat for
        them: its rounds go on while they are stuck), or a lone relay's."""
        relay_round = event.worker.startswith(RELAY_PREFIX)
        if self._heartbeat is not None and (relay_round == (self.kind == "relay")):
            self._heartbeat.set(self._clock())

    def batch_handled(self, event: BatchHandled) -> None:
        if self._loops is None:
            return
        counts: dict[tuple[str, str], int] = {}
        projected = self.kind == "projector"
        for (topic, _, _), outcome in event.outcomes.items():
            key = (topic, "projected" if projected else outcome.lower())
            counts[key] = counts.get(key, 0) + 1
        for (topic, outcome), count in counts.items():
            self._loops.consumed.labels(topic=topic, outcome=outcome).inc(count)
        if (applier := self._applier) is not None and event.outcomes:
            applier.batch_size.observe(len(event.outcomes))
            applier.batch_duration.observe(event.duration_s)
            applier.applied.inc(counts_of(counts, "completed"))

    def rebalanced(self, event: Rebalanced) -> None:
        if self._loops is None:
            return
        if event.assigned:
            self._loops.rebalances.labels(change="assigned").inc()
        if event.revoked:
            self._loops.rebalances.labels(change="revoked").inc()
        with self._lock:
            held = self._held.setdefault(event.worker, set())
            held |= event.assigned
            held -= event.revoked
            per_topic: dict[str, int] = {}
            for partitions in self._held.values():
                for topic, _ in partitions:
                    per_topic[topic] = per_topic.get(topic, 0) + 1
            touched = {topic for topic, _ in event.assigned | event.revoked}
            for topic in touched | set(per_topic):
                self._loops.assigned.labels(topic=topic).set(per_topic.get(topic, 0))

    # -- the applier -----------------------------------------------------------------------

    def steps_timed(self, event: StepsTimed) -> None:
        if self._applier is not None:
            for step, seconds in event.durations.items():
                self._applier.step_duration.labels(step=step).observe(seconds)

    def retried_in_place(self, event: RetriedInPlace) -> None:
        if self._applier is not None:
            self._applier.in_place.labels(code=event.reason).inc()

    def retries_delivered(self, event: RetriesDelivered) -> None:
        if self._applier is not None:
            for tier, late_s in event.lateness:
                self._applier.lateness.labels(tier=tier).observe(max(late_s, 0.0))

    def plans_completed(self, event: PlansCompleted) -> None:
        if self._applier is not None:
            for seconds in event.latencies:
                self._applier.end_to_end.observe(max(seconds, 0.0))

    def routes_taken(self, event: RoutesTaken) -> None:
        if self._applier is not None:
            for tier, count in event.tiers.items():
                self._applier.retries.labels(tier=tier).inc(count)
            for code, count in event.dead_letters.items():
                self._applier.dlq_routed.labels(code=code).inc(count)

    def breaker_changed(self, event: BreakerChanged) -> None:
        if self._applier is None:
            return
        with self._lock:
            self._breakers[(event.worker, event.dependency)] = event.state.lower()
            worst = max(
                (s for (_, d), s in self._breakers.items() if d == event.dependency),
                key=_SEVERITY.__getitem__,
            )
            for state in BREAKER_STATES:
                self._applier.breaker_state.labels(dependency=event.dependency, state=state).set(
                    1 if state == worst else 0
                )

    def breaker_forced(self, event: BreakerForced) -> None:
        if self._applier is None:
            return
        # (AUTOMATIC: released, no forced mode)
        mode = FORCED_MODES.get(event.control.mode) if event.control is not None else None
        for value in FORCED_MODES.values():
            self._applier.breaker_forced.labels(dependency=event.dependency, mode=value).set(
                1 if value == mode else 0
            )

    def degraded(self, event: Degraded) -> None:
        if self._applier is None:
            return
        with self._lock:
            self._levels[event.worker] = event.level
            self._applier.degradation.set(max(self._levels.values()))

    # -- the relay -------------------------------------------------------------------------

    def published(self, event: Published) -> None:
        if self._relay is None:
            return
        for stage, count in event.stages.items():
            self._relay.transitions.labels(stage=stage).inc(count)
        for seconds in event.latencies:
            self._relay.publish.observe(max(seconds, 0.0))

    def purged(self, event: Purged) -> None:
        if self._relay is None:
            return
        self._relay.purged_rows.inc(event.rows)
        if event.failed:
            self._relay.purge_failures.inc()


def counts_of(counts: Mapping[tuple[str, str], int], outcome: str) -> int:
    return sum(count for (_, o), count in counts.items() if o == outcome)


__all__ = ["Kind", "PipelineMetrics", "ProjectionMetrics", "worker_info"]
