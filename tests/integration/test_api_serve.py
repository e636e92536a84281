"""`graph-ingest serve` as a process: it opens its services, answers its health endpoints (ready
says PostgreSQL and Kafka answer and how far the projection is behind), serves its OpenAPI
document and docs, and stops on SIGTERM; started while PostgreSQL is out of reach, the API stays
up, not ready, and opens its services once PostgreSQL answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from graph_ingest.observability.check import HealthUnreachable, ask
from graph_ingest.observability.probes import ProbeAnswer
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.api_helpers import api_client, api_settings
from tests.integration.pipeline import Pipeline
from tests.processes import stop_gracefully
from tests.tcp_proxy import TcpProxy, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Asks the server itself, whatever proxy the environment names."""


def test_serve_answers_its_health_endpoints(pipeline: Pipeline, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    process = start_bound(
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
        with DIRECT.open(f"{url}/openapi.json", timeout=30) as answer:
            assert "/api/v1/dlq/messages/{dlq_id}/replay" in json.load(answer)["paths"]
        with DIRECT.open(f"{url}/docs", timeout=30) as answer:
            assert b"swagger-ui" in answer.read()
    finally:
        stop_gracefully([process])
    # uvicorn shuts down gracefully, then ends by the signal it caught (not killed: -SIGKILL)
    assert process.returncode in (0, -signal.SIGTERM), log.read_text()


def test_the_api_starts_through_a_postgresql_outage_and_opens_once_it_answers(
    pipeline: Pipeline,
) -> None:
    # Given PostgreSQL out of reach (a proxy to it that refuses connections)
    proxy = TcpProxy(("127.0.0.1", pipeline.settings.postgres.port))
    proxy.start()
    proxy.cut()
    settings = api_settings(pipeline)
    postgres = settings.postgres.model_copy(update={"port": proxy.port, "connect_timeout_s": 1})
    try:
        with api_client(settings.model_copy(update={"postgres": postgres})) as client:
            # Then the API is up: live, not started nor ready (saying why), each route a 503
            assert client.get("/health/live").status_code == 200
            startup = client.get("/health/startup")
            assert startup.status_code == 503
            assert "UNAVAILABLE" in startup.json()["reason"]
            assert client.get("/health/ready").json()["status"] == "not_ready"
            stats = client.get("/api/v1/dlq/stats")
            assert (stats.status_code, stats.json()["error"]["code"]) == (503, "UNAVAILABLE")

            # When PostgreSQL answers again, then the API opens its services by itself
            proxy.start()
            wait_until(
                lambda: client.get("/health/startup").status_code == 200,
                timeout_s=90,
                interval_s=0.5,
                what="the API to open its services",
            )
            assert client.get("/api/v1/dlq/stats").json()["total"] == 0
    finally:
        proxy.cut()
