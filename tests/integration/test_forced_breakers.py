"""`graph-ingest breaker open|close|release` against real applier processes: the word goes through
the compacted control topic, and every applier of the group obeys it (seed 002 §7.3, issue 18).

Two `worker applier --health-port` processes share the group: forcing Neo4j's breaker open
pauses both (readiness says degraded, by whom and why; live stays 200) and no plan completes;
forcing it closed resumes both and the plans complete; release hands it back to the failures.
A worker started after a force-open starts paused (the topic is read from its beginning), and a
malformed control record, met while following or while catching up, is skipped: the last word
stands and nobody crashes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.integration.test_health_endpoints import Worker
from tests.processes import stop_gracefully

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

OBEYED_WITHIN_S = 5.0
"""The issue asks for 5 s: the follower polls every 0.2 s, a loop reads the word every round
(0.5 s); the margin is for a loaded machine."""
WATCH_S = 3.0
"""How long a paused worker is watched not completing a plan it could take."""


def breaker(pipeline: Pipeline, *args: str) -> Any:
    """`graph-ingest breaker <args> --json` on this pipeline: its JSON output."""
    result = CliRunner().invoke(cli, ["breaker", *args, "--json"], env=pipeline.env())
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def appliers(pipeline: Pipeline, tmp_path: Path, *names: str) -> list[Worker]:
    workers = []
    for name in names:
        (home := tmp_path / name).mkdir()
        workers.append(
            Worker.start(pipeline, home, ["applier"], GRAPH_INGEST_APPLIER__WORKER_ID=name)
        )
    return workers


@pytest.fixture
def stopped_at_the_end() -> Iterator[list[Worker]]:
    workers: list[Worker] = []
    try:
        yield workers
    finally:
        stop_gracefully(w.process for w in workers)


def neo4j_breaker(worker: Worker, mode: str, status: str, timeout_s: float) -> dict[str, Any]:
    """Wait until ``worker``'s readiness shows Neo4j's breaker in ``mode`` and the worker
    ``status``; its readiness body."""
    answer = worker.ready_when(
        lambda body: (
            body["breakers"].get("neo4j", {}).get("mode") == mode and body["status"] == status
        ),
        f"ready to show neo4j {mode} and say {status}",
        timeout_s=timeout_s,
    )
    return answer.body


def not_applied_while_watched(pipeline: Pipeline, workers: list[Worker], op_id: str) -> None:
    """For WATCH_S: the plan is not even admitted, and every worker stays live and degraded."""
    until = time.monotonic() + WATCH_S
    while time.monotonic() < until:
        assert pipeline.store.get_operation(op_id) is None
        for worker in workers:
            live, ready = worker.ask("live"), worker.ask("ready")
            assert live is not None and live.status == 200, live
            assert ready is not None and ready.body["status"] == "degraded", ready
        time.sleep(0.5)


def publish_garbage_control(pipeline: Pipeline) -> None:
    producer = Producer(pipeline.settings.kafka.producer_config())
    producer.produce(pipeline.settings.topics.control, key=b"neo4j", value=b"\xc3\x01 not avro")
    assert producer.flush(30) == 0


def test_forcing_neo4j_open_then_closed_then_released_reaches_every_applier(
    pipeline: Pipeline, tmp_path: Path, stopped_at_the_end: list[Worker]
) -> None:
    # Given two appliers sharing the group, each showing its breakers from the start
    stopped_at_the_end += appliers(pipeline, tmp_path, "applier-a", "applier-b")
    for worker in stopped_at_the_end:
        body = neo4j_breaker(worker, "AUTOMATIC", "ready", timeout_s=120)
        assert body["breakers"]["postgres"] == {"state": "CLOSED", "mode": "AUTOMATIC"}
    first = doc_v1(pipeline, "doc-1")
    pipeline.publish(first)
    pipeline.wait_stage(first.operation_id, Stage.COMPLETED, timeout_s=90)

    # When an operator forces Neo4j's breaker open
    forced = breaker(pipeline, "open", "neo4j", "--reason", "index rebuild", "--by", "alice")
    assert [(v["mode"], v["by"], v["reason"]) for v in forced] == [
        ("FORCED_OPEN", "alice", "index rebuild")
    ]
    # Then both pause: degraded, and readiness says by whom and why
    for worker in stopped_at_the_end:
        body = neo4j_breaker(worker, "FORCED_OPEN", "degraded", OBEYED_WITHIN_S)
        assert (body["breakers"]["neo4j"]["by"], body["dependencies"]["neo4j"]) == (
            "alice",
            "OPEN",
        )
        assert "forced open by alice" in body["reason"] and "index rebuild" in body["reason"]
    # and a malformed control record meanwhile changes nothing (the last word stands)
    publish_garbage_control(pipeline)
    second = doc_v1(pipeline, "doc-2")
    pipeline.publish(second)
    not_applied_while_watched(pipeline, stopped_at_the_end, second.operation_id)

    # When it is forced closed, both resume and the plan completes
    breaker(pipeline, "close", "neo4j", "--reason", "rebuild done", "--by", "bob")
    for worker in stopped_at_the_end:
        neo4j_breaker(worker, "FORCED_CLOSED", "ready", OBEYED_WITHIN_S)
    pipeline.wait_stage(second.operation_id, Stage.COMPLETED, timeout_s=90)

    # When it is released, it is automatic again, and status says who released it
    breaker(pipeline, "release", "neo4j", "--by", "carol")
    for worker in stopped_at_the_end:
        body = neo4j_breaker(worker, "AUTOMATIC", "ready", OBEYED_WITHIN_S)
        assert (body["breakers"]["neo4j"]["state"], body["breakers"]["neo4j"]["by"]) == (
            "CLOSED",
            "carol",
        )
    status = {view["dependency"]: view for view in breaker(pipeline, "status")}
    assert (status["neo4j"]["mode"], status["neo4j"]["by"]) == ("AUTOMATIC", "carol")
    assert status["postgres"] == {"dependency": "postgres", "mode": "AUTOMATIC", "forced": False}
    # And the audit log names each change, who made it and why
    audited = CliRunner().invoke(cli, ["audit", "--json"], env=pipeline.env())
    assert audited.exit_code == 0, audited.output
    changes = [
        (entry["action"], entry["by"], entry["target"], entry["reason"])
        for entry in json.loads(audited.output)["entries"]
        if entry["action"].startswith("breaker.")
    ]
    assert changes == [
        ("breaker.force-open", "alice", ["neo4j"], "index rebuild"),
        ("breaker.force-close", "bob", ["neo4j"], "rebuild done"),
        ("breaker.release", "carol", ["neo4j"], None),
    ]


def test_an_applier_started_after_a_force_open_starts_paused(
    pipeline: Pipeline, tmp_path: Path, stopped_at_the_end: list[Worker]
) -> None:
    # Given Neo4j's breaker forced open, then a malformed record on the same key, and a plan
    breaker(pipeline, "open", "neo4j", "--reason", "maintenance", "--by", "alice")
    publish_garbage_control(pipeline)
    plan = doc_v1(pipeline, "doc-late")
    pipeline.publish(plan)
    # When an applier starts afterwards
    stopped_at_the_end += appliers(pipeline, tmp_path, "late-applier")
    (late,) = stopped_at_the_end
    # Then it starts paused, with its partitions, and takes nothing
    topics = pipeline.settings.topics
    body = neo4j_breaker(late, "FORCED_OPEN", "degraded", timeout_s=120)
    assert body["breakers"]["neo4j"]["reason"] == "maintenance"
    late.ready_when(
        lambda body: (
            len([p for p in body["assigned"] if p["topic"] == topics.plans])
            == topics.plan_partitions
        ),
        "every plans partition assigned",
    )
    not_applied_while_watched(pipeline, [late], plan.operation_id)
    # and once released, the plan completes
    breaker(pipeline, "release", "neo4j")
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=90)
