"""`graph-ingest worker applier --health-port`: a real applier process answers startup, live and
ready; when its Neo4j becomes unreachable (the network cut by a proxy, Neo4j itself stays up) its
breaker opens and ready says degraded and why while live stays 200; `graph-ingest check` agrees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.observability.check import HealthUnreachable, ask
from graph_ingest.observability.probes import ProbeAnswer
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import send_operations
from tests.integration.test_applier import doc_v1
from tests.operation_histories import COMPLETED, history
from tests.tcp_proxy import TcpProxy, free_port
from tests.unit.test_health_server import check

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
LIVE_MAX_AGE_S = 15.0
"""Short, so a test can outlast it: a loop that stopped beating would fail /health/live."""


def check_json(*args: str) -> tuple[int, dict[str, Any]]:
    """`graph-ingest check`'s exit code and the JSON it printed."""
    code, out, err = check(*args)
    assert out, err
    return code, json.loads(out)


class Worker:
    """A worker process and its health URL; a probe of a worker that died fails the test
    with its log instead of waiting out the deadline."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    @classmethod
    def start(cls, pipeline: Pipeline, tmp_path: Path, args: list[str], **env: str) -> Worker:
        """`graph-ingest worker <args> --health-port <a free port>` on ``pipeline``."""
        port = free_port()
        log = tmp_path / "worker.log"
        process = start_bound(
            [
                sys.executable,
                "-m",
                "graph_ingest.cli.main",
                "worker",
                *args,
                "--health-port",
                str(port),
            ],
            cwd=REPO,
            env={
                **os.environ,
                **pipeline.env(),
                "GRAPH_INGEST_HEALTH__LIVE_MAX_AGE_S": str(LIVE_MAX_AGE_S),
                **env,
            },
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        return cls(process, f"http://127.0.0.1:{port}", log)

    def kill(self) -> None:
        """By pid, if it is still running."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def ask(self, probe: str) -> ProbeAnswer | None:
        assert self.process.poll() is None, self.log.read_text()
        try:
            return ask(self.url, probe, timeout_s=5)
        except HealthUnreachable:
            return None  # not listening yet

    def stays_live(self, for_s: float, ready_status: str) -> None:
        """Live (200) and ``ready_status`` at every look for ``for_s``: longer than the max
        age, so only a loop that keeps beating (polling, idle or paused) passes."""
        until = time.monotonic() + for_s
        while time.monotonic() < until:
            live, ready = self.ask("live"), self.ask("ready")
            assert live is not None and live.status == 200, live
            assert ready is not None and ready.body["status"] == ready_status, ready
            time.sleep(0.5)

    def ready_with_every_partition(self, topic: str, partitions: int) -> ProbeAnswer:
        wanted = [{"topic": topic, "partition": p} for p in range(partitions)]
        return self.ready_when(
            lambda body: all(p in body["assigned"] for p in wanted),
            f"ready to list every partition of {topic}",
        )

    def ready_when(self, holds: Any, what: str, timeout_s: float = 120) -> ProbeAnswer:
        def answer() -> ProbeAnswer | None:
            found = self.ask("ready")
            return found if found is not None and holds(found.body) else None

        return wait_until(answer, timeout_s=timeout_s, interval_s=0.5, what=what)


def test_health_of_a_real_applier_through_a_neo4j_outage(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    neo4j = urlparse(pipeline.settings.neo4j.uri)
    proxy = TcpProxy((neo4j.hostname or "127.0.0.1", neo4j.port or 7687))
    proxy.start()
    worker = Worker.start(
        pipeline,
        tmp_path,
        ["applier"],
        GRAPH_INGEST_NEO4J__URI=f"bolt://127.0.0.1:{proxy.port}",
        GRAPH_INGEST_APPLIER__WORKER_ID="health-test",
    )
    try:
        # Given a started applier: startup and live answer 200, ready lists its assignment
        wait_until(
            lambda: (a := worker.ask("startup")) is not None and a.status == 200,
            timeout_s=120,
            interval_s=0.5,
            what="/health/startup to answer 200",
        )
        assert (live := worker.ask("live")) is not None and live.status == 200
        topics = pipeline.settings.topics
        ready = worker.ready_with_every_partition(topics.plans, topics.plan_partitions)
        assert (ready.status, ready.body["status"], ready.body["worker"]) == (
            200,
            "ready",
            "health-test",
        )
        code, body = check_json("--url", worker.url, "--ready")
        assert (code, body["status"], body["worker"]) == (0, "ready", "health-test")
        first, second = doc_v1(pipeline, "doc-1"), doc_v1(pipeline, "doc-2")
        pipeline.publish(first)
        pipeline.wait_stage(first.operation_id, Stage.COMPLETED, timeout_s=90)
        # When its Neo4j becomes unreachable while a plan waits to be applied
        proxy.cut()
        pipeline.publish(second)
        # Then ready says degraded and why, and live stays 200 (a restart would not help)
        degraded = worker.ready_when(
            lambda body: body["status"] == "degraded", "ready to say degraded"
        )
        assert degraded.status == 503
        assert degraded.body["dependencies"]["neo4j"] == "OPEN"
        assert "neo4j" in degraded.body["reason"]
        assert degraded.body["degradation_level"] == "L1"
        worker.stays_live(LIVE_MAX_AGE_S * 1.5, "degraded")
        code, body = check_json("--url", worker.url, "--ready")
        assert (code, body["status"]) == (1, "degraded")
        code, body = check_json("--url", worker.url, "--live")
        assert (code, body["status"]) == (0, "live")
        # and once Neo4j answers again, the plan completes and the worker is ready again
        proxy.start()
        pipeline.wait_stage(second.operation_id, Stage.COMPLETED, timeout_s=120)
        worker.ready_when(lambda body: body["status"] == "ready", "ready after the outage")
        # When the worker stops, nothing answers any more: check says so and exits 1
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=60) == 0, worker.log.read_text()
        code, _, err = check("--url", worker.url, "--live")
        assert code == 1 and "nothing answers" in err
    finally:
        worker.kill()
        proxy.cut()


def test_health_of_a_real_planner(pipeline: Pipeline, tmp_path: Path) -> None:
    worker = Worker.start(
        pipeline,
        tmp_path,
        ["planner", "--planner", "tests.planners:build"],
        GRAPH_INGEST_PLANNER__WORKER_ID="planner-health",
    )
    try:
        # Given a planner started with a health port, idle (no request arrives)
        # Then it becomes ready with every requests partition, and stays live and started
        topics = pipeline.settings.topics
        ready = worker.ready_with_every_partition(topics.requests, topics.request_partitions)
        assert (ready.status, ready.body["worker"], ready.body["dependencies"]) == (
            200,
            "planner-health",
            {},
        )
        assert (answer := worker.ask("startup")) is not None and answer.status == 200
        worker.stays_live(LIVE_MAX_AGE_S * 1.5, "ready")  # idle: only its polls beat
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=60) == 0, worker.log.read_text()
    finally:
        worker.kill()


def test_health_of_a_real_projector(pipeline: Pipeline, tmp_path: Path) -> None:
    worker = Worker.start(
        pipeline,
        tmp_path,
        ["projector"],
        GRAPH_INGEST_PROJECTOR__WORKER_ID="projector-health",
        GRAPH_INGEST_PROJECTOR__GROUP_ID=f"{pipeline.settings.applier.group_id}.projector",
    )
    try:
        # Given a projector started with a health port, idle (no operation event arrives)
        # Then it becomes ready with every operations partition, and stays live and started
        topics = pipeline.settings.topics
        ready = worker.ready_with_every_partition(topics.operations, topics.operation_partitions)
        assert (ready.status, ready.body["worker"]) == (200, "projector-health")
        assert (answer := worker.ask("startup")) is not None and answer.status == 200
        worker.stays_live(LIVE_MAX_AGE_S * 1.5, "ready")  # idle: only its polls beat
        # When operation events arrive, its readiness shows the lag they leave: none once folded
        send_operations(pipeline.settings, history("op-ready", COMPLETED))
        ready = worker.ready_when(
            lambda body: (
                body["lag"][0]["last_event_age_s"] is not None and body["lag"][0]["state"] == "idle"
            ),
            "readiness to show the events folded",
        )
        [lag] = ready.body["lag"]
        assert (lag["projection"], lag["offsets_behind"], lag["seconds_behind"]) == (
            "operation_status",
            0,
            0.0,
        )
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=60) == 0, worker.log.read_text()
    finally:
        worker.kill()
