"""Serving the metrics: the setting, the worker options, /metrics beside a worker and in the API
(its requests counted by route template, never by path)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_ingest.api.metrics import install_metrics
from graph_ingest.cli.main import cli
from graph_ingest.observability.exposition import serving_metrics
from graph_ingest.settings import Settings
from graph_ingest.settings.metrics import MetricsSettings

pytestmark = pytest.mark.timeout(60)


def test_the_setting_defaults_to_no_port_on_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().metrics == MetricsSettings(port=None, host="127.0.0.1")
    monkeypatch.setenv("GRAPH_INGEST_METRICS__PORT", "9464")
    monkeypatch.setenv("GRAPH_INGEST_METRICS__HOST", "0.0.0.0")
    assert Settings().metrics == MetricsSettings(port=9464, host="0.0.0.0")


@pytest.mark.parametrize("kind", ["applier", "planner", "projector", "relay"])
def test_every_worker_takes_a_metrics_port(kind: str) -> None:
    shown = CliRunner().invoke(cli, ["worker", kind, "--help"])
    assert shown.exit_code == 0, shown.output
    assert "--metrics-port PORT" in shown.output
    assert "GRAPH_INGEST_METRICS__PORT" in shown.output


class _Closing(Collector):
    def __init__(self) -> None:
        self.closed = False

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("graph_ingest_test_collected", "a collector's gauge")
        family.add_metric([], 7)
        return [family]

    def close(self) -> None:
        self.closed = True


def test_metrics_are_served_with_the_collectors_while_the_block_runs() -> None:
    registry = CollectorRegistry()
    Gauge("graph_ingest_test_gauge", "a gauge", registry=registry).set(3)
    extra = _Closing()
    with serving_metrics(MetricsSettings(port=0), registry, [extra]) as port:
        assert port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    assert "graph_ingest_test_gauge 3.0" in text
    assert "graph_ingest_test_collected 7.0" in text
    assert extra.closed


def test_no_port_serves_nothing_but_still_registers_and_closes() -> None:
    registry = CollectorRegistry()
    extra = _Closing()
    with serving_metrics(MetricsSettings(), registry, [extra]) as port:
        assert port is None
        assert registry.get_sample_value("graph_ingest_test_collected") == 7
    assert extra.closed


def test_the_api_counts_requests_by_route_template() -> None:
    app = FastAPI()

    @app.get("/api/v1/operations/{operation_id}")
    def operation(operation_id: str) -> dict[str, str]:
        return {"operation_id": operation_id}

    registry = CollectorRegistry()
    install_metrics(app, registry)
    route = "/api/v1/operations/{operation_id}"
    duration = "graph_ingest_http_request_duration_seconds_count"
    assert registry.get_sample_value(duration, {"route": route}) == 0  # known routes at 0
    client = TestClient(app)
    assert client.get("/api/v1/operations/op-1").status_code == 200
    assert client.get("/api/v1/operations/op-2").status_code == 200
    assert client.get("/nowhere").status_code == 404
    text = client.get("/metrics").text
    requests = "graph_ingest_http_requests_total"
    labels = {"method": "GET", "route": route, "status": "200"}
    assert registry.get_sample_value(requests, labels) == 2
    assert registry.get_sample_value(duration, {"route": route}) == 2
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert registry.get_sample_value(requests, unmatched) == 1
    assert "op-1" not in text
