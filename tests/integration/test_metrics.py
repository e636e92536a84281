"""Metrics against real Kafka, Neo4j and PostgreSQL (issue 19 item 1): after a run of mixed
outcomes every metric is present and its counts equal the write side; the scrape output of every
real process (applier, planner, projector, relay, api) passes ``promtool check metrics``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.observability.metrics import PipelineMetrics
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA, pipeline_metrics, run_projector
from tests.dashboard_files import dashboard_metric_names
from tests.integration.conftest import PipelineFactory
from tests.integration.metrics_helpers import (
    label_values,
    metric_names,
    registry_text,
    sample,
    samples,
    scrape_when_up,
    total,
)
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.integration.test_applier import doc_v1, doc_v2, stale_edit
from tests.kafka_messages import read_to_end
from tests.processes import stop_gracefully
from tests.prometheus_files import (
    exposition_metric_names,
    promtool_check_metrics,
    rule_label_matchers,
    scraped_metric_names,
)
from tests.samples import Entity, sample_plan
from tests.tcp_proxy import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
ROUTING = {"retry_initial_backoff_s": 0.05, "retry_max_backoff_s": 0.2, "in_place_max_attempts": 1}
ONE_DELIVERY = 2  # failed writes per failed delivery, with in_place_max_attempts=1
BABBAGE = Entity("Person", "Charles Babbage")

APPLIER_METRICS = {
    "graph_ingest_worker_info",
    "graph_ingest_worker_heartbeat_timestamp_seconds",
    "graph_ingest_messages_consumed_total",
    "graph_ingest_assigned_partitions",
    "graph_ingest_rebalances_total",
    "graph_ingest_plans_applied_total",
    "graph_ingest_batch_size_plans_bucket",
    "graph_ingest_batch_duration_seconds_bucket",
    "graph_ingest_stage_duration_seconds_bucket",
    "graph_ingest_retries_total",
    "graph_ingest_retry_lateness_seconds_bucket",
    "graph_ingest_dlq_routed_total",
    "graph_ingest_breaker_state",
    "graph_ingest_breaker_forced",
    "graph_ingest_degradation_level",
    "graph_ingest_in_place_retries_total",
    "graph_ingest_end_to_end_seconds_bucket",
    "graph_ingest_stage_transitions_total",
    "graph_ingest_relay_publish_duration_seconds_bucket",
}


def test_after_mixed_outcomes_the_counts_equal_the_write_side(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given an applier (its relay beside it) watched by the metrics, on a fresh registry, whose
    # Neo4j writes of Babbage time out for one delivery
    pipeline = pipeline_factory(**ROUTING)
    registry = CollectorRegistry()
    metrics = pipeline_metrics(pipeline.settings, "applier", registry, relay=True)
    writer = FailingWriter(
        pipeline.settings,
        StatusCode.DEADLINE_EXCEEDED,
        culprits=[BABBAGE.node_id("it")],
        fail_times=ONE_DELIVERY,
    )
    pipeline.start_applier(writer, subscribers=[metrics])
    # When plans that complete, repeat, conflict, retry and cannot decode are published
    v1, other = doc_v1(pipeline, "doc-1"), doc_v1(pipeline, "doc-2")
    v2 = doc_v2(pipeline, v1.next_state)
    stale = stale_edit(pipeline, v1)
    babbage = sample_plan("it", "doc-babbage", "Babbage.", [BABBAGE], [], graph=pipeline.graph)
    pipeline.publish(v1, other, v2)
    pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)
    pipeline.publish(v1, stale)
    pipeline.publish_raw(b"it/doc-poison", b"not a plan")
    pipeline.wait_stage(stale.operation_id, Stage.CONFLICT)
    pipeline.dlq_entries(1)
    pipeline.publish(babbage)  # alone: one failed delivery is two failed writes
    pipeline.wait_stage(babbage.operation_id, Stage.COMPLETED, timeout_s=120)
    schema = pipeline.settings.postgres.schema_name
    wait_until(
        lambda: (
            pipeline.sql(f'SELECT count(*) FROM "{schema}".outbox WHERE published_at IS NULL')
            == [(0,)]
        ),
        timeout_s=60,
        what="the outbox to be published",
    )
    topics = pipeline.settings.topics
    events = Counter(
        headers[kafka_headers.STAGE].decode().lower()
        for _, _, headers in read_to_end(pipeline.settings, topics.operations)
    )
    plans_published = len(read_to_end(pipeline.settings, topics.plans))
    tier_copies = {
        topic: len(read_to_end(pipeline.settings, topic)) for topic, _ in topics.retry_tiers
    }
    dlq_rows = dict(pipeline.sql(f'SELECT code, count(*) FROM "{schema}".dlq_entries GROUP BY 1'))
    dlq_messages = len(read_to_end(pipeline.settings, topics.dlq))

    def transitions() -> dict[str, float]:
        by_stage = label_values(
            registry_text(registry), "graph_ingest_stage_transitions_total", "stage"
        )
        return {stage: count for stage, count in by_stage.items() if count}

    wait_until(lambda: transitions() == events, timeout_s=30, what=f"transitions to be {events}")
    text = registry_text(registry)
    # Then the outcomes of the plans topic add up to the plans published to it, and of each tier
    # to the copies it holds
    consumed = "graph_ingest_messages_consumed_total"
    assert plans_published == 7
    assert total(text, consumed, topic=topics.plans) == plans_published
    for topic, copies in tier_copies.items():
        assert total(text, consumed, topic=topic) == copies
    assert sum(tier_copies.values()) == 1
    assert label_values(text, consumed, "outcome") == {
        "completed": 4,
        "duplicate": 1,
        "conflict": 1,
        "retrying": 1,
        "dead_lettered": 1,
        "parked": 0,
        "dropped": 0,
    }
    assert sample(text, "graph_ingest_plans_applied_total") == 4
    assert sample(text, "graph_ingest_end_to_end_seconds_count") == 4
    # and the stage transitions are the operations topic's events, by stage
    assert events["completed"] == 4 and events["conflict"] == 1
    # and the retries and DLQ entries are what routing wrote
    first_tier = topics.retry_tiers[0][1]
    assert label_values(text, "graph_ingest_retries_total", "tier") == {
        f"{delay:g}s": (1.0 if delay == first_tier else 0.0) for _, delay in topics.retry_tiers
    }
    assert sample(text, "graph_ingest_retry_lateness_seconds_count", tier=f"{first_tier:g}s") == 1
    routed = label_values(text, "graph_ingest_dlq_routed_total", "code")
    assert {code: count for code, count in routed.items() if count} == dlq_rows
    assert sum(dlq_rows.values()) == dlq_messages == 1
    # and the batch retried in place is counted by its code
    assert total(text, "graph_ingest_in_place_retries_total", code="deadline_exceeded") >= 1
    assert total(text, "graph_ingest_batch_size_plans_sum") == plans_published + 1
    for step in ("admit", "graph_write", "state_commit"):
        assert total(text, "graph_ingest_stage_duration_seconds_count", step=step) >= 1
    assert total(text, "graph_ingest_relay_publish_duration_seconds_count") >= sum(events.values())
    assert (
        total(text, "graph_ingest_assigned_partitions", topic=topics.plans)
        == topics.plan_partitions
    )
    assert sample(text, "graph_ingest_breaker_state", dependency="neo4j", state="closed") == 1
    assert sample(text, "graph_ingest_degradation_level") == 0
    assert metric_names(text) >= APPLIER_METRICS
    promtool_check_metrics(text)


def _spawn(pipeline: Pipeline, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", *args],
        cwd=REPO,
        env={**os.environ, **pipeline.env(), **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def test_promtool_accepts_the_scrape_of_every_real_process(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    # Given every kind of process, each serving /metrics on a port of its own
    ports = {kind: free_port() for kind in ("applier", "planner", "projector", "relay", "api")}
    commands = {
        "applier": ["worker", "applier", "--no-relay", "--metrics-port", str(ports["applier"])],
        "planner": ["worker", "planner", "--metrics-port", str(ports["planner"])],
        "projector": ["worker", "projector", "--metrics-port", str(ports["projector"])],
        "relay": ["worker", "relay", "--metrics-port", str(ports["relay"])],
        "api": ["serve", "--port", str(ports["api"])],
    }
    env = {
        "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA": str(BUNDLED_GRAPH_SCHEMA),
        "GRAPH_INGEST_PROJECTOR__GROUP_ID": f"{pipeline.settings.applier.group_id}.projector",
    }
    processes = {
        kind: _spawn(pipeline, tmp_path / f"{kind}.log", *args, **env)
        for kind, args in commands.items()
    }
    try:
        # When a plan goes through them
        plan = doc_v1(pipeline, "doc-1")
        pipeline.publish(plan)
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=120)
        # Then each one's scrape passes promtool, and names the metrics of its kind
        scraped: dict[str, str] = {}
        for kind, port in ports.items():
            assert processes[kind].poll() is None, (tmp_path / f"{kind}.log").read_text()
            text = scraped[kind] = scrape_when_up(f"http://127.0.0.1:{port}/metrics")
            promtool_check_metrics(text)
            names = metric_names(text)
            assert not {n for n in names if n.endswith("_created")}, kind
            assert sample(text, "graph_ingest_worker_info", **_info(text)) == 1, kind
            if kind == "applier":
                assert (
                    APPLIER_METRICS
                    - {
                        "graph_ingest_stage_transitions_total",
                        "graph_ingest_relay_publish_duration_seconds_bucket",
                    }
                    <= names
                )
            if kind == "relay":
                assert {
                    "graph_ingest_outbox_purged_rows_total",
                    "graph_ingest_outbox_purge_failures_total",
                } <= names
                _relay_counts_completed(f"http://127.0.0.1:{port}/metrics")
            if kind == "planner":
                assert "graph_ingest_planner_extraction_issues_total" in names
            if kind == "projector":
                assert {
                    "graph_ingest_projection_lag_seconds",
                    "graph_ingest_projection_lag_offsets",
                    "graph_ingest_projection_state",
                } <= names
            if kind == "api":  # the first scrape's own request shows in the second
                text = scraped[kind] = scrape_when_up(f"http://127.0.0.1:{port}/metrics")
                promtool_check_metrics(text)
                assert sample(
                    text,
                    "graph_ingest_http_requests_total",
                    method="GET",
                    route="/metrics",
                    status="200",
                )
                assert "graph_ingest_http_request_duration_seconds_bucket" in metric_names(text)
        # And every metric the dashboard and the alert rules name is served by one of them, with
        # every label value the rules select on (else a panel stays empty, a rule silent forever)
        served = set().union(*(exposition_metric_names(text) for text in scraped.values()))
        assert dashboard_metric_names() - served == set()
        assert scraped_metric_names() - served == set()
        labelled = {
            (name, label, value)
            for text in scraped.values()
            for (name, labels) in samples(text)
            for label, value in labels
        }
        assert rule_label_matchers() - labelled == set()
    finally:
        stop_gracefully(processes.values())


def _relay_counts_completed(url: str) -> None:
    wait_until(
        lambda: (
            total(scrape_when_up(url), "graph_ingest_stage_transitions_total", stage="completed")
            >= 1
        ),
        timeout_s=60,
        what="the relay to count the COMPLETED event",
    )


def _info(text: str) -> dict[str, str]:
    """The labels of the scrape's info metric."""
    ((_, labels),) = [key for key in samples(text) if key[0] == "graph_ingest_worker_info"]
    return dict(labels)


def test_projector_thread_reports_its_lag_through_the_subscriber(pipeline: Pipeline) -> None:
    # A projector's loop feeds the same subscriber: its consumed events count as projected
    registry = CollectorRegistry()
    settings = projector_settings(pipeline)
    metrics = pipeline_metrics(settings, "projector", registry)
    assert isinstance(metrics, PipelineMetrics)
    stop = threading.Event()
    thread = threading.Thread(
        target=run_projector, args=(settings, stop), kwargs={"subscribers": [metrics]}, daemon=True
    )
    thread.start()
    try:
        pipeline.start_applier()
        plan = doc_v1(pipeline, "doc-1")
        pipeline.publish(plan)
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)

        def projected_every_event() -> bool:
            events = len(read_to_end(pipeline.settings, pipeline.settings.topics.operations))
            projected = total(
                registry_text(registry), "graph_ingest_messages_consumed_total", outcome="projected"
            )
            return events >= 4 and projected == events

        wait_until(projected_every_event, timeout_s=60, what="every operation event projected")
        text = registry_text(registry)
        assert sample(text, "graph_ingest_worker_heartbeat_timestamp_seconds")
    finally:
        stop.set()
        thread.join(timeout=60)
