"""The pipeline's metric families, created on a registry with every label value known in
advance at 0 (``observability.metrics`` feeds them from the loops' hooks): their names, help,
label values and buckets, the issue 19 catalogue in code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from graph_ingest.domain.breaker_control import BreakerMode
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.classify import DEADLOCK, LOCK_WAIT

Kind = Literal["applier", "planner", "projector", "relay", "api"]

OUTCOMES: Mapping[str, tuple[str, ...]] = {
    "applier": (
        "completed",
        "duplicate",
        "conflict",
        "parked",
        "retrying",
        "dead_lettered",
        "dropped",
    ),
    "planner": ("planned", "dead_lettered", "dropped"),
    "projector": ("projected",),
}
"""The outcomes of a message, by the kind of process that consumes it."""

STEPS = ("admit", "graph_write", "state_commit")
BREAKER_STATES = tuple(state.value.lower() for state in BreakerState)
FORCED_MODES = {BreakerMode.FORCED_OPEN: "open", BreakerMode.FORCED_CLOSED: "closed"}
IN_PLACE_REASONS = (
    DEADLOCK,
    LOCK_WAIT,
    *(code.value.lower() for code in StatusCode if code.is_transient),
)
"""The reasons known in advance a batch is retried in place (``resilience.classify.retry_reason``)."""
STAGES = tuple(stage.value.lower() for stage in Stage)
DLQ_CODES = tuple(code.value for code in StatusCode if code is not StatusCode.OK)
PROJECTION_STATES = ("idle", "catching_up", "stalled", "rebuilding")
"""``projections.lag.LagState``'s values (the projections sit above this layer)."""
REBUILDING = "rebuilding"


SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
END_TO_END_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def worker_info(
    registry: CollectorRegistry, kind: Kind, *, worker_id: str, group: str, protocol: str
) -> Gauge:
    """``graph_ingest_worker_info`` = 1: the one metric whose labels name the worker."""
    info = Gauge(
        "graph_ingest_worker_info",
        "The process: its kind, worker id, consumer group and group protocol (always 1)",
        ["kind", "worker_id", "group", "protocol"],
        registry=registry,
    )
    info.labels(kind=kind, worker_id=worker_id, group=group, protocol=protocol).set(1)
    return info


def heartbeat(registry: CollectorRegistry) -> Gauge:
    """The last poll round of any loop of the process (a consuming loop's or a relay's)."""
    return Gauge(
        "graph_ingest_worker_heartbeat_timestamp_seconds",
        "Unix time of the last poll round of any loop of the process",
        registry=registry,
    )


class LoopFamilies:
    """The metrics of every consuming loop: messages, partitions, rebalances."""

    def __init__(self, registry: CollectorRegistry, kind: Kind, topics: Sequence[str]) -> None:
        self.consumed = Counter(
            "graph_ingest_messages_consumed_total",
            "Messages consumed with a durable outcome, by topic and outcome",
            ["topic", "outcome"],
            registry=registry,
        )
        self.assigned = Gauge(
            "graph_ingest_assigned_partitions",
            "Partitions the process's loops hold, by topic",
            ["topic"],
            registry=registry,
        )
        self.rebalances = Counter(
            "graph_ingest_rebalances_total",
            "Rebalances that changed a loop's partitions, by change (assigned, revoked)",
            ["change"],
            registry=registry,
        )
        for topic in topics:
            self.assigned.labels(topic=topic)
            for outcome in OUTCOMES.get(kind, ()):
                self.consumed.labels(topic=topic, outcome=outcome)
        for change in ("assigned", "revoked"):
            self.rebalances.labels(change=change)


class ApplierFamilies:
    """The applier's metrics (``graph_ingest_*`` of the catalogue's applier section)."""

    def __init__(
        self, registry: CollectorRegistry, tiers: Sequence[str], dependencies: Sequence[str]
    ) -> None:
        self._batches(registry)
        self._failures(registry)
        self._breakers(registry)
        self._created_at_zero(tiers, dependencies)

    def _batches(self, registry: CollectorRegistry) -> None:
        self.applied = Counter(
            "graph_ingest_plans_applied_total",
            "Plans whose graph write and state commit completed (outcome COMPLETED)",
            registry=registry,
        )
        self.batch_size = Histogram(
            "graph_ingest_batch_size_plans",
            "Plans per applied batch",
            buckets=BATCH_SIZE_BUCKETS,
            registry=registry,
        )
        self.batch_duration = Histogram(
            "graph_ingest_batch_duration_seconds",
            "Seconds to give a batch durable outcomes, every in-place attempt included",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.step_duration = Histogram(
            "graph_ingest_stage_duration_seconds",
            "Seconds per apply step of a batch (admit, graph_write, state_commit)",
            ["step"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.end_to_end = Histogram(
            "graph_ingest_end_to_end_seconds",
            "Seconds from a plan message's publication to its COMPLETED commit",
            buckets=END_TO_END_BUCKETS,
            registry=registry,
        )

    def _failures(self, registry: CollectorRegistry) -> None:
        self.retries = Counter(
            "graph_ingest_retries_total",
            "Plans this process sent to a retry tier, by tier (its delay)",
            ["tier"],
            registry=registry,
        )
        self.lateness = Histogram(
            "graph_ingest_retry_lateness_seconds",
            "Seconds a retry-tier copy was delivered after its due time (0 if early), by tier",
            ["tier"],
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.dlq_routed = Counter(
            "graph_ingest_dlq_routed_total",
            "DLQ entries this process wrote, by error code (followers of a dead-lettered plan"
            " included)",
            ["code"],
            registry=registry,
        )
        self.in_place = Counter(
            "graph_ingest_in_place_retries_total",
            "Batches retried in place, by reason (deadlock, lock_wait, else the status code)",
            ["code"],
            registry=registry,
        )

    def _breakers(self, registry: CollectorRegistry) -> None:
        self.breaker_state = Gauge(
            "graph_ingest_breaker_state",
            "1 for a dependency's breaker's current state (the worst over the process's loops)",
            ["dependency", "state"],
            registry=registry,
        )
        self.breaker_forced = Gauge(
            "graph_ingest_breaker_forced",
            "1 while an operator forces a dependency's breaker (mode open or closed)",
            ["dependency", "mode"],
            registry=registry,
        )
        self.degradation = Gauge(
            "graph_ingest_degradation_level",
            "The process's degradation level, 0..3 (L0..L3; the highest over its loops)",
            registry=registry,
        )

    def _created_at_zero(self, tiers: Sequence[str], dependencies: Sequence[str]) -> None:
        for step in STEPS:
            self.step_duration.labels(step=step)
        for tier in tiers:
            self.retries.labels(tier=tier)
            self.lateness.labels(tier=tier)
        for code in DLQ_CODES:
            self.dlq_routed.labels(code=code)
        for dependency in dependencies:
            for state in BREAKER_STATES:
                self.breaker_state.labels(dependency=dependency, state=state).set(
                    1 if state == "closed" else 0
                )
            for mode in FORCED_MODES.values():
                self.breaker_forced.labels(dependency=dependency, mode=mode)
        for reason in IN_PLACE_REASONS:
            self.in_place.labels(code=reason)


class RelayFamilies:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.transitions = Counter(
            "graph_ingest_stage_transitions_total",
            "Operation events the outbox relay published, by stage",
            ["stage"],
            registry=registry,
        )
        self.publish = Histogram(
            "graph_ingest_relay_publish_duration_seconds",
            "Seconds from an outbox row's creation to Kafka's acknowledgement of it",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.purged_rows = Counter(
            "graph_ingest_outbox_purged_rows_total",
            "Published outbox rows the relay deleted past their retention",
            registry=registry,
        )
        self.purge_failures = Counter(
            "graph_ingest_outbox_purge_failures_total",
            "Deletes of published outbox rows that failed (tried again after the interval)",
            registry=registry,
        )
        for stage in STAGES:
            self.transitions.labels(stage=stage)


__all__ = [
    "BATCH_SIZE_BUCKETS",
    "BREAKER_STATES",
    "DLQ_CODES",
    "END_TO_END_BUCKETS",
    "FORCED_MODES",
    "HTTP_BUCKETS",
    "IN_PLACE_REASONS",
    "LATENESS_BUCKETS",
    "OUTCOMES",
    "PROJECTION_STATES",
    "REBUILDING",
    "SECONDS_BUCKETS",
    "STAGES",
    "STEPS",
    "ApplierFamilies",
    "Kind",
    "LoopFamilies",
    "RelayFamilies",
    "heartbeat",
    "worker_info",
]
