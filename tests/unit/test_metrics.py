"""The metrics subscriber: hook events in, samples out, on a fresh registry per test."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import GraphTransactionAborted
from graph_ingest.hooks import Hooks, relay_loop
from graph_ingest.observability.metrics import PipelineMetrics, ProjectionMetrics
from graph_ingest.resilience.classify import retry_reason
from graph_ingest.store.errors import StoreError

PLANS = "ingestion.plans"
TIERS = ("1s", "5s", "30s")


def applier(registry: CollectorRegistry, *, relay: bool = True) -> PipelineMetrics:
    return PipelineMetrics(
        registry,
        "applier",
        worker_id="applier-0",
        group="g",
        protocol="classic",
        topics=[PLANS, "ingestion.plans.retry.1s"],
        tiers=TIERS,
        relay=relay,
    )


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_known_label_values_are_exported_at_zero() -> None:
    # Given a fresh applier's metrics, with nothing fired yet
    registry = CollectorRegistry()
    applier(registry)
    # Then every known label value reads 0 (breakers closed: 1 for closed)
    for outcome in ("completed", "duplicate", "conflict", "parked", "retrying", "dead_lettered"):
        assert (
            value(registry, "graph_ingest_messages_consumed_total", topic=PLANS, outcome=outcome)
            == 0
        )
    for tier in TIERS:
        assert value(registry, "graph_ingest_retries_total", tier=tier) == 0
        assert value(registry, "graph_ingest_retry_lateness_seconds_count", tier=tier) == 0
    for step in ("admit", "graph_write", "state_commit"):
        assert value(registry, "graph_ingest_stage_duration_seconds_count", step=step) == 0
    for code in ("deadlock", "lock_wait", "aborted", "unavailable", "deadline_exceeded"):
        assert value(registry, "graph_ingest_in_place_retries_total", code=code) == 0
    for stage in ("prepared", "graph_applied", "state_committed", "completed", "dead_lettered"):
        assert value(registry, "graph_ingest_stage_transitions_total", stage=stage) == 0
    assert value(registry, "graph_ingest_dlq_routed_total", code="INVALID_ARGUMENT") == 0
    for dependency in ("neo4j", "postgres"):
        assert (
            value(registry, "graph_ingest_breaker_state", dependency=dependency, state="closed")
            == 1
        )
        assert (
            value(registry, "graph_ingest_breaker_state", dependency=dependency, state="open") == 0
        )
        assert (
            value(registry, "graph_ingest_breaker_forced", dependency=dependency, mode="open") == 0
        )
    assert value(registry, "graph_ingest_degradation_level") == 0
    assert value(registry, "graph_ingest_rebalances_total", change="assigned") == 0
    assert value(registry, "graph_ingest_plans_applied_total") == 0
    assert value(registry, "graph_ingest_end_to_end_seconds_count") == 0
    assert (
        value(
            registry,
            "graph_ingest_worker_info",
            kind="applier",
            worker_id="applier-0",
            group="g",
            protocol="classic",
        )
        == 1
    )


def test_batch_outcomes_become_counts_sizes_and_durations() -> None:
    registry = CollectorRegistry()
    hooks = Hooks("applier-0", applier(registry))
    # When a batch of four has durable outcomes after two attempts
    hooks.batch_handled(
        {
            (PLANS, 0, 1): "COMPLETED",
            (PLANS, 0, 2): "COMPLETED",
            (PLANS, 1, 7): "DUPLICATE",
            ("ingestion.plans.retry.1s", 0, 3): "DEAD_LETTERED",
        },
        duration_s=0.3,
        attempts=2,
    )
    hooks.steps_timed({"admit": 0.01, "graph_write": 0.2, "state_commit": 0.05})
    # Then
    consumed = "graph_ingest_messages_consumed_total"
    assert value(registry, consumed, topic=PLANS, outcome="completed") == 2
    assert value(registry, consumed, topic=PLANS, outcome="duplicate") == 1
    assert value(registry, consumed, topic="ingestion.plans.retry.1s", outcome="dead_lettered") == 1
    assert value(registry, "graph_ingest_plans_applied_total") == 2
    assert value(registry, "graph_ingest_batch_size_plans_sum") == 4
    assert value(registry, "graph_ingest_batch_duration_seconds_sum") == pytest.approx(0.3)
    assert value(
        registry, "graph_ingest_stage_duration_seconds_sum", step="graph_write"
    ) == pytest.approx(0.2)
    assert value(registry, "graph_ingest_stage_duration_seconds_count", step="admit") == 1


def test_routes_retries_lateness_and_end_to_end() -> None:
    registry = CollectorRegistry()
    hooks = Hooks("applier-0", applier(registry))
    hooks.routes_taken({"1s": 2, "30s": 1}, {"INVALID_ARGUMENT": 3})
    hooks.retries_delivered([("1s", 0.2), ("5s", -0.5)])
    hooks.plans_completed([0.04, 0.7])
    hooks.retried_in_place("deadlock")
    hooks.retried_in_place("lock_wait")
    hooks.retried_in_place("deadlock")
    assert value(registry, "graph_ingest_retries_total", tier="1s") == 2
    assert value(registry, "graph_ingest_retries_total", tier="30s") == 1
    assert value(registry, "graph_ingest_dlq_routed_total", code="INVALID_ARGUMENT") == 3
    assert value(registry, "graph_ingest_retry_lateness_seconds_sum", tier="1s") == pytest.approx(
        0.2
    )
    # an early copy counts as on time (a histogram of lateness has no negative buckets)
    assert value(registry, "graph_ingest_retry_lateness_seconds_bucket", tier="5s", le="0.01") == 1
    assert value(registry, "graph_ingest_end_to_end_seconds_bucket", le="0.05") == 1
    assert value(registry, "graph_ingest_end_to_end_seconds_count") == 2
    assert value(registry, "graph_ingest_in_place_retries_total", code="deadlock") == 2
    assert value(registry, "graph_ingest_in_place_retries_total", code="lock_wait") == 1


def test_breakers_show_the_worst_state_over_the_loops() -> None:
    registry = CollectorRegistry()
    metrics = applier(registry)
    main, tiers = Hooks("applier-0", metrics), Hooks("applier-0/retry", metrics)
    main.breaker_changed("neo4j", "CLOSED", "OPEN")
    tiers.breaker_changed("neo4j", "CLOSED", "HALF_OPEN")
    state = "graph_ingest_breaker_state"
    assert value(registry, state, dependency="neo4j", state="open") == 1
    assert value(registry, state, dependency="neo4j", state="closed") == 0
    main.breaker_changed("neo4j", "OPEN", "CLOSED")
    assert value(registry, state, dependency="neo4j", state="half_open") == 1
    assert value(registry, state, dependency="neo4j", state="open") == 0
    tiers.breaker_changed("neo4j", "HALF_OPEN", "CLOSED")
    assert value(registry, state, dependency="neo4j", state="closed") == 1
    assert value(registry, state, dependency="postgres", state="closed") == 1


def test_forced_breakers_and_degradation() -> None:
    registry = CollectorRegistry()
    metrics = applier(registry)
    main, tiers = Hooks("applier-0", metrics), Hooks("applier-0/retry", metrics)
    control = BreakerControl(
        dependency="postgres",
        mode=BreakerMode.FORCED_OPEN,
        by="alice",
        reason="maintenance",
        at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    main.breaker_forced("postgres", control)
    forced = "graph_ingest_breaker_forced"
    assert value(registry, forced, dependency="postgres", mode="open") == 1
    assert value(registry, forced, dependency="postgres", mode="closed") == 0
    main.breaker_forced("postgres", None)
    assert value(registry, forced, dependency="postgres", mode="open") == 0
    main.degraded(2)
    tiers.degraded(1)
    assert value(registry, "graph_ingest_degradation_level") == 2
    main.degraded(0)
    assert value(registry, "graph_ingest_degradation_level") == 1


def test_partitions_held_and_rebalances() -> None:
    registry = CollectorRegistry()
    metrics = applier(registry)
    main, tiers = Hooks("applier-0", metrics), Hooks("applier-0/retry", metrics)
    main.rebalanced(assigned=frozenset({(PLANS, 0), (PLANS, 1)}))
    tiers.rebalanced(assigned=frozenset({("ingestion.plans.retry.1s", 0)}))
    main.rebalanced(revoked=frozenset({(PLANS, 1)}))
    assert value(registry, "graph_ingest_assigned_partitions", topic=PLANS) == 1
    assert (
        value(registry, "graph_ingest_assigned_partitions", topic="ingestion.plans.retry.1s") == 1
    )
    assert value(registry, "graph_ingest_rebalances_total", change="assigned") == 2
    assert value(registry, "graph_ingest_rebalances_total", change="revoked") == 1


def test_heartbeat_is_the_last_poll_time() -> None:
    registry = CollectorRegistry()
    metrics = PipelineMetrics(
        registry, "planner", worker_id="p", topics=["ingest.requests"], clock=lambda: 1234.5
    )
    assert value(registry, "graph_ingest_worker_heartbeat_timestamp_seconds") == 0
    Hooks("p", metrics).polled()
    assert value(registry, "graph_ingest_worker_heartbeat_timestamp_seconds") == 1234.5
    # the planner's outcomes, and its extraction-issue counter on the same registry
    Hooks("p", metrics).batch_handled({("ingest.requests", 0, 0): "PLANNED"}, 0.1)
    assert (
        value(
            registry,
            "graph_ingest_messages_consumed_total",
            topic="ingest.requests",
            outcome="planned",
        )
        == 1
    )
    assert metrics.planning is not None
    assert registry.get_sample_value("graph_ingest_plans_applied_total") is None


def test_projector_outcomes_count_as_projected() -> None:
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, "projector", worker_id="x", topics=["ingestion.operations"])
    Hooks("x", metrics).batch_handled(
        {("ingestion.operations", 0, 0): "ADVANCE", ("ingestion.operations", 0, 1): "DUPLICATE"},
        0.1,
    )
    assert (
        value(
            registry,
            "graph_ingest_messages_consumed_total",
            topic="ingestion.operations",
            outcome="projected",
        )
        == 2
    )


def test_relay_publications_by_stage_and_latency() -> None:
    registry = CollectorRegistry()
    hooks = Hooks("relay/x", PipelineMetrics(registry, "relay", worker_id="relay/x"))
    hooks.published({"prepared": 3, "completed": 2}, [0.02, 0.03, 1.5])
    assert value(registry, "graph_ingest_stage_transitions_total", stage="prepared") == 3
    assert value(registry, "graph_ingest_stage_transitions_total", stage="completed") == 2
    assert value(registry, "graph_ingest_relay_publish_duration_seconds_count") == 3


def test_relay_purges_count_deleted_rows_and_failed_tries() -> None:
    registry = CollectorRegistry()
    hooks = Hooks("relay/x", PipelineMetrics(registry, "relay", worker_id="relay/x"))
    assert value(registry, "graph_ingest_outbox_purged_rows_total") == 0
    assert value(registry, "graph_ingest_outbox_purge_failures_total") == 0
    hooks.purged(5_000, False)
    hooks.purged(0, True)
    hooks.purged(120, False)
    hooks.purged(0, False)  # nothing past its retention: no event
    assert value(registry, "graph_ingest_outbox_purged_rows_total") == 5_120
    assert value(registry, "graph_ingest_outbox_purge_failures_total") == 1


def test_projection_lag_and_state_at_scrape_time() -> None:
    registry = CollectorRegistry()
    lag: dict[str, object] = {"lag": "not read yet"}
    registry.register(ProjectionMetrics(lambda: lag))
    state = "graph_ingest_projection_state"
    assert value(registry, state, state="idle") == 0
    assert value(registry, "graph_ingest_projection_lag_seconds") is None
    lag["lag"] = [
        {
            "projection": "operation_status",
            "offsets_behind": 7,
            "seconds_behind": 2.5,
            "state": "catching_up",
        },
        {
            "projection": "operation_status (rebuild)",
            "offsets_behind": 70,
            "seconds_behind": 9,
            "state": "rebuilding",
        },
    ]
    assert value(registry, "graph_ingest_projection_lag_seconds") == 2.5
    assert value(registry, "graph_ingest_projection_lag_offsets") == 7
    assert value(registry, state, state="catching_up") == 1
    assert value(registry, state, state="rebuilding") == 1
    assert value(registry, state, state="stalled") == 0


class _Deadlock(Exception):
    pass


_Deadlock.__name__ = "DeadlockDetected"


class _Neo4jTransient(Exception):
    code = "Neo.TransientError.Transaction.LockAcquisitionTimeout"


def test_retry_reason_tells_deadlocks_and_lock_waits_apart() -> None:
    deadlock = StoreError("aborted", code=StatusCode.ABORTED)
    deadlock.__cause__ = _Deadlock("deadlock detected")
    assert retry_reason(deadlock) == "deadlock"
    lock_wait = GraphTransactionAborted("lock")
    lock_wait.__cause__ = _Neo4jTransient()
    assert retry_reason(lock_wait) == "lock_wait"
    timeout = StoreError(
        "canceling statement due to lock timeout", code=StatusCode.DEADLINE_EXCEEDED
    )
    assert retry_reason(timeout) == "lock_wait"
    assert retry_reason(StoreError("down", code=StatusCode.UNAVAILABLE)) == "unavailable"
    assert retry_reason(RuntimeError("bug")) == "internal"


@pytest.mark.skipif(not Path("/usr/bin/promtool").exists(), reason="promtool not installed")
def test_promtool_accepts_every_kind_of_process() -> None:
    for kind in ("applier", "planner", "projector", "relay"):
        registry = CollectorRegistry()
        metrics = PipelineMetrics(registry, kind, worker_id="w", topics=["t"], tiers=TIERS)
        Hooks("w", metrics).polled()
        checked = subprocess.run(
            ["/usr/bin/promtool", "check", "metrics"],
            input=generate_latest(registry),
            capture_output=True,
            timeout=30,
        )
        assert checked.returncode == 0, (kind, checked.stdout, checked.stderr)


def test_every_issue_code_of_the_validator_is_known() -> None:
    # the validator's and extractors' codes are listed, so that each is exported at 0
    import re

    from graph_ingest.planning.metrics import KNOWN_ISSUE_CODES

    planning = Path(__file__).resolve().parents[2] / "src" / "graph_ingest" / "planning"
    found = set()
    for name in ("validation.py", "llm_output.py", "rules.py"):
        text = (planning / name).read_text()
        found |= set(re.findall(r'Problem\(\s*"([A-Z_]+)"', text))
        found |= set(re.findall(r'code="([A-Z_]+)"', text))
        found |= set(re.findall(r'^([A-Z_]+) = "\1"$', text, re.M))
    assert found <= set(KNOWN_ISSUE_CODES), found - set(KNOWN_ISSUE_CODES)
    assert len(found) >= 15


def test_a_relay_beside_the_loops_does_not_beat_for_them() -> None:
    # An applier's relay turns while its consuming loops may be stuck: only they beat for it
    registry = CollectorRegistry()
    times = iter([10.0, 20.0])
    metrics = PipelineMetrics(
        registry, "applier", worker_id="a", topics=[PLANS], relay=True, clock=lambda: next(times)
    )
    heartbeat = "graph_ingest_worker_heartbeat_timestamp_seconds"
    Hooks(relay_loop("s"), metrics).polled()
    assert value(registry, heartbeat) == 0
    Hooks("a", metrics).polled()
    assert value(registry, heartbeat) == 10
    # while a relay on its own beats with its rounds
    alone = CollectorRegistry()
    relay = PipelineMetrics(alone, "relay", worker_id=relay_loop("s"), clock=lambda: 5.0)
    Hooks(relay_loop("s"), relay).polled()
    assert value(alone, heartbeat) == 5
    assert alone.get_sample_value("graph_ingest_rebalances_total", {"change": "assigned"}) is None
