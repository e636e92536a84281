"""The health endpoints over real HTTP on 127.0.0.1, and `graph-ingest check` against them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.hooks import Hooks
from graph_ingest.observability.check import HealthUnreachable, ask
from graph_ingest.observability.health import HealthSubscriber
from graph_ingest.observability.server import HealthServer, routes, serving_health
from graph_ingest.settings import Settings
from graph_ingest.settings.health import HealthSettings
from tests.tcp_proxy import free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def health() -> HealthSubscriber:
    return HealthSubscriber("applier-0")


@pytest.fixture
def url(health: HealthSubscriber) -> Iterator[str]:
    server = HealthServer(routes(health, HealthSettings()), "127.0.0.1", 0)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.close()


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


def test_each_probe_answers_json_on_its_path(health: HealthSubscriber, url: str) -> None:
    assert ask(url, "startup", timeout_s=5).status == 503
    Hooks("applier-0", health).polled()
    assert ask(url, "startup", timeout_s=5).body["status"] == "started"
    assert ask(url, "live", timeout_s=5).body["status"] == "live"
    ready = ask(url, "ready", timeout_s=5)
    assert (ready.status, ready.body["status"], ready.body["worker"]) == (200, "ready", "applier-0")


def test_an_unknown_path_is_404_with_the_paths_there_are(url: str) -> None:
    answer = ask(url, "nothing", timeout_s=5)
    assert answer.status == 404
    assert answer.body["paths"] == ["/health/live", "/health/ready", "/health/startup"]


def test_check_exits_0_when_healthy_and_1_when_not_printing_the_json(
    health: HealthSubscriber, url: str
) -> None:
    hooks = Hooks("applier-0", health)
    hooks.polled()
    code, out, _ = check("--url", url)
    assert (code, json.loads(out)["status"]) == (0, "ready")
    hooks.breaker_changed("postgres", "CLOSED", "OPEN")
    code, out, _ = check("--url", url, "--ready")
    assert (code, json.loads(out)["status"]) == (1, "degraded")
    code, out, _ = check("--url", url, "--live")
    assert (code, json.loads(out)["status"]) == (0, "live")


def test_check_says_so_and_exits_1_when_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = check("--url", url, "--live")
    assert code == 1
    assert out == ""
    assert "nothing answers at" in err
    with pytest.raises(HealthUnreachable):
        ask("file:///etc/hostname", "live", timeout_s=5)


def test_check_takes_the_port_from_the_settings_or_asks_for_a_url(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPH_INGEST_HEALTH__PORT", raising=False)
    code, _, err = check("--live")
    assert code == 2 and "--url" in err
    monkeypatch.setenv("GRAPH_INGEST_HEALTH__PORT", url.rsplit(":", 1)[1])
    assert Settings().health.port == int(url.rsplit(":", 1)[1])
    assert check("--live")[0] == 0


def test_a_port_in_use_is_a_clear_error_at_start(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(ConfigurationError, match=f"127.0.0.1:{port}"):
        HealthServer({}, "127.0.0.1", port).start()


def test_no_port_no_server_and_no_subscriber() -> None:
    with serving_health(HealthSettings(), "applier-0") as subscribers:
        assert subscribers == ()
    with serving_health(HealthSettings(port=0), "applier-0") as subscribers:
        assert [type(s) for s in subscribers] == [HealthSubscriber]


@pytest.mark.parametrize("command", [["worker", "applier"], ["worker", "planner"]])
def test_workers_offer_the_health_port(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "--health-port" in result.output
    assert CliRunner().invoke(cli, ["check", "--help"]).exit_code == 0
