"""`graph-ingest serve` as a process: it opens its services, answers its health endpoints (ready
says PostgreSQL and Kafka answer and how far the projection is behind), and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graph_ingest.observability.check import HealthUnreachable, ask
from graph_ingest.observability.probes import ProbeAnswer
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.processes import stop_gracefully
from tests.tcp_proxy import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def test_serve_answers_its_health_endpoints(pipeline: Pipeline, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "graph_ingest.cli.main", "serve", "--port", str(port)],
        cwd=REPO,
        env={**os.environ, **pipeline.env()},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answered(probe: str) -> ProbeAnswer | None:
        assert process.poll() is None, log.read_text()
        try:
            return ask(url, probe, timeout_s=30)
        except HealthUnreachable:
            return None  # not listening yet

    try:
        live = wait_until(
            lambda: answered("live"), timeout_s=120, interval_s=0.5, what="serve to answer"
        )
        assert (live.status, live.body["status"]) == (200, "live")
        startup = answered("startup")
        assert startup is not None and (startup.status, startup.body["status"]) == (200, "started")
        ready = answered("ready")
        assert ready is not None, log.read_text()
        assert (ready.status, ready.body["status"]) == (200, "ready"), ready.body
        assert ready.body["dependencies"] == {"postgres": "up", "kafka": "up"}
        assert ready.body["projections"][0]["state"] == "idle"
    finally:
        stop_gracefully([process])
    # uvicorn shuts down gracefully, then ends by the signal it caught (not killed: -SIGKILL)
    assert process.returncode in (0, -signal.SIGTERM), log.read_text()
