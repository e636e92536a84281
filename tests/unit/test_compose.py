"""compose/ as real validators see it: Debian's docker-compose 1.29 (`config -q`), the Compose
Specification schema (check-jsonschema), promtool (the Prometheus config), and the real CLI
(every service's command must parse with click: a missing subcommand or option fails).

Also what no validator checks: healthchecks and scrape jobs ask the ports the commands serve,
the healthcheck one-liner fails when a probe does, every variable the compose file references is
documented in .env.example, no secret is committed, and the environment each service gets is a
valid configuration whose defaults are the settings' own.

A validator whose binary is missing skips its test, except under CI (which installs them all):
there it fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import click
import pytest
import yaml
from pydantic import BaseModel, TypeAdapter

from graph_ingest.cli.main import cli
from graph_ingest.settings import Settings
from tests.dashboard_files import DASHBOARD
from tests.prometheus_files import ALERT_RULES, alerts, run_promtool
from tests.tcp_proxy import free_port

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose"
COMPOSE_FILE = COMPOSE / "docker-compose.yml"
ENV_EXAMPLE = COMPOSE / ".env.example"
PROMETHEUS_CONFIG = COMPOSE / "prometheus" / "prometheus.yml"
GRAFANA = COMPOSE / "grafana" / "provisioning"

APP_SERVICES = ("init", "planner", "applier", "projector", "api")
WORKERS = {"planner": "planner", "applier": "applier", "projector": "projector"}
"""Long-running services of the application image -> the Prometheus job that scrapes them."""

SECRET = re.compile(r"PASSWORD|TOKEN|SECRET|API_KEY|_AUTH$")
REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")

"""What this deployment uses before its branch is merged: checked as soon as the CLI has it,
an expected failure (xfail, never a pass) until then."""


def validator(name: str, install: str) -> str:
    """The validator's path (the venv's bin first): a skip when missing, a failure under CI."""
    found = shutil.which(
        name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    if found:
        return found
    message = f"{name} is not installed ({install})"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run this validator: {message}")
    pytest.skip(message)


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())  # merges `<<:` keys
    return loaded


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def example_env() -> dict[str, str]:
    """``.env.example`` as docker-compose reads it: NAME=VALUE lines, ``#`` comments."""
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines())
    return {
        name: value for name, value in (p for p in pairs if len(p) == 2) if not name.startswith("#")
    }


def filled_env(**overrides: str) -> dict[str, str]:
    """``.env.example`` with every empty value (the secrets) set, as an operator would."""
    env = example_env()
    for name, value in env.items():
        if not value:
            token = secrets.token_urlsafe(24)
            env[name] = f"'{json.dumps({'ops': token})}'" if name.endswith("TOKENS") else token
    return {**env, **overrides}


def write_env(path: Path, env: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{name}={value}\n" for name, value in env.items()))
    return path


def strings(node: object) -> Iterator[str]:
    """Every string of a loaded YAML document, keys and values (comments are gone)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


def references() -> list[re.Match[str]]:
    """Every ``${VARIABLE...}`` of the compose file (``$$`` is an escaped dollar: no reference)."""
    return [m for s in strings(compose()) for m in REFERENCE.finditer(s.replace("$$", ""))]


def interpolate(value: object, env: Mapping[str, str]) -> str:
    """A compose value with ``${X}``, ``${X:-default}`` and ``${X:?error}`` resolved from env."""

    def one(match: re.Match[str]) -> str:
        found = env.get(match["name"], "").strip("'")
        if match["op"] == ":?":
            assert found, f"{match['name']} must be set: {match['arg']}"
        return found or (match["arg"] if match["op"] == ":-" else "")

    return REFERENCE.sub(one, str(value))


def docker_compose(*args: str, env_file: Path) -> subprocess.CompletedProcess[str]:
    binary = validator(
        "docker-compose", "Debian: apt-get install --no-install-recommends docker-compose"
    )
    command = [binary, "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


# --- The validators -------------------------------------------------------------------------


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    result = docker_compose("config", "-q", env_file=write_env(tmp_path / ".env", filled_env()))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("secret", sorted(n for n in example_env() if SECRET.search(n)))
def test_docker_compose_refuses_to_start_without_a_secret(tmp_path: Path, secret: str) -> None:
    env = filled_env(**{secret: ""})
    result = docker_compose("config", "-q", env_file=write_env(tmp_path / ".env", env))
    assert result.returncode != 0
    assert f"set {secret} in compose/.env" in result.stderr


def test_the_compose_specification_accepts_the_file() -> None:
    binary = validator("check-jsonschema", "pip install -e '.[dev]'")
    command = [binary, "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_prometheus_config() -> None:
    """The config and the rule file it loads (promtool resolves it relative to the config)."""
    run_promtool("check", "config", str(PROMETHEUS_CONFIG))


def test_prometheus_loads_the_alert_rules_it_is_given() -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    prometheus = services()["prometheus"]
    assert config["rule_files"] == ["alerts.yml"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in prometheus["volumes"]


# --- Commands against the real CLI ----------------------------------------------------------


def invocations(service: Mapping[str, Any]) -> list[list[str]]:
    """The graph-ingest argument lists a service runs: its command after the image's
    ENTRYPOINT, or each ``graph-ingest …`` of a ``/bin/sh -ec`` script (nothing else allowed)."""
    entrypoint = service.get("entrypoint")
    if entrypoint is None:
        return [list(service["command"])]
    assert entrypoint == ["/bin/sh", "-ec"], f"unexpected entrypoint {entrypoint}"
    (script,) = service["command"]
    commands = [shlex.split(part) for part in re.split(r"&&|;|\n", script) if part.strip()]
    assert all(c[0] == "graph-ingest" for c in commands), f"not only graph-ingest: {script}"
    return [c[1:] for c in commands]


def parse(args: list[str]) -> click.Context:
    """``graph-ingest ARGS`` parsed by the real CLI down to its command, which is not run: the
    command's context (its parsed params); a missing command or option fails."""
    ctx = cli.make_context("graph-ingest", list(args))
    command: click.Command = cli
    while isinstance(command, click.Group):
        # Click < 9 keeps the subcommand's name out of ctx.args (in _protected_args).
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None, f"no command in {args}"
        ctx, command = sub.make_context(name, rest, parent=ctx), sub
    return ctx


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_command_parses_with_the_real_cli(name: str) -> None:
    for args in invocations(services()[name]):
        # (make_context raises on an unknown command or option, or a value it cannot parse)
        assert not isinstance(parse(args).command, click.Group), f"no command in {args}"


def test_the_init_job_creates_the_topics_and_migrates() -> None:
    commands = invocations(services()["init"])
    assert [parse(args).command_path for args in commands] == [
        "graph-ingest topics create",
        "graph-ingest db migrate",
    ]


def test_a_command_the_cli_lacks_fails_the_check() -> None:
    with pytest.raises(click.UsageError):
        parse(["worker", "applier", "--health-prot", "8081"])
    with pytest.raises(click.UsageError):
        parse(["worker", "appliers"])
    with pytest.raises(click.BadParameter):
        parse(["worker", "applier", "--health-port", "http"])


def served_port(name: str) -> int:
    """The port the service's health endpoints answer on, as its command parses."""
    ctx = parse(invocations(services()[name])[0])
    port = ctx.params["port" if ctx.command_path == "graph-ingest serve" else "health_port"]
    assert isinstance(port, int), f"{name} serves no health endpoints"
    return port


def healthcheck_ports(name: str) -> set[int]:
    test = services()[name]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], test
    return {int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)/health/", test[3])}


@pytest.mark.parametrize("name", [*WORKERS, "api"])
def test_the_healthcheck_asks_the_port_the_command_serves(name: str) -> None:
    assert healthcheck_ports(name) == {served_port(name)}


class _Probes(BaseHTTPRequestHandler):
    statuses: ClassVar[dict[str, int]] = {}

    def do_GET(self) -> None:  # the name http.server dispatches GET to
        self.send_response(self.statuses.get(self.path, 404))
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # the base's signature
        """Quiet."""


@pytest.fixture
def probes() -> Iterator[tuple[int, dict[str, int]]]:
    """A stand-in health server: its port and the status each path answers (settable)."""
    statuses: dict[str, int] = {}
    handler = type("Probes", (_Probes,), {"statuses": statuses})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], statuses
    finally:
        server.shutdown()
        server.server_close()


def healthcheck(one_liner: str) -> int:
    """The healthcheck's exit status, run here by this Python (the image's is 3.11 too)."""
    run = [sys.executable, "-c", one_liner]
    return subprocess.run(run, capture_output=True, timeout=30, check=False).returncode


@pytest.mark.parametrize("name", [*WORKERS, "api"])
def test_the_healthcheck_fails_unless_started_and_live(
    name: str, probes: tuple[int, dict[str, int]]
) -> None:
    port, statuses = probes
    (served,) = healthcheck_ports(name)
    one_liner = services()[name]["healthcheck"]["test"][3].replace(f":{served}/", f":{port}/")
    statuses.update({"/health/startup": 200, "/health/live": 200})
    assert healthcheck(one_liner) == 0
    statuses["/health/live"] = 503
    assert healthcheck(one_liner) != 0
    statuses.update({"/health/startup": 503, "/health/live": 200})
    assert healthcheck(one_liner) != 0
    assert healthcheck(one_liner.replace(f":{port}/", f":{free_port()}/")) != 0


# --- Prometheus and Grafana -----------------------------------------------------------------


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_prometheus_scrapes_every_process_where_it_serves_metrics() -> None:
    jobs = {
        job["job_name"]: job
        for job in yaml.safe_load(PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    }
    assert set(jobs) == scrape_jobs() == {*WORKERS.values(), "api", "prometheus"}
    ports = {
        job: int(option(services()[n]["command"], "--metrics-port")) for n, job in WORKERS.items()
    }
    ports["api"] = int(option(services()["api"]["command"], "--port"))
    for job, port in ports.items():
        (sd,) = jobs[job]["dns_sd_configs"]
        assert (sd["names"], sd["type"], sd["port"]) == ([job], "A", port), job
        assert jobs[job].get("metrics_path", "/metrics") == "/metrics"
    for name in WORKERS:
        assert services()[name]["environment"]["GRAPH_INGEST_METRICS__HOST"] == "0.0.0.0"


def scrape_jobs() -> set[str]:
    return {
        job["job_name"] for job in yaml.safe_load(PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    }


def test_the_alert_rules_select_the_scrape_jobs() -> None:
    """A rule's ``job`` matcher names jobs that exist, and an alternation (the targets-down
    alerts) covers every graph-ingest job: a renamed job would leave them silent forever."""
    assert ALERT_RULES.parent == PROMETHEUS_CONFIG.parent  # rule_files: [alerts.yml]
    processes = scrape_jobs() - {"prometheus"}
    matchers = [
        (alert.name, op, value)
        for alert in alerts()
        for op, value in re.findall(r'\bjob\s*(=~|!~|!=|=)\s*"([^"]*)"', alert.expr)
    ]
    assert matchers
    for name, op, value in matchers:
        if op in ("=", "!="):
            assert value in processes, (name, value)
        else:
            assert processes <= set(value.split("|")), (name, value)


def test_grafana_provisions_the_datasource_and_the_dashboards() -> None:
    grafana = services()["grafana"]
    (datasource,) = yaml.safe_load((GRAFANA / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    (provider,) = yaml.safe_load((GRAFANA / "dashboards" / "graph-ingest.yml").read_text())[
        "providers"
    ]
    assert (datasource["uid"], datasource["type"]) == ("prometheus", "prometheus")
    assert datasource["url"] == "http://prometheus:9090"
    assert provider["type"] == "file"
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in grafana["volumes"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert (home.parent, home.name) == (Path(provider["options"]["path"]), DASHBOARD.name)
    assert DASHBOARD.parent == COMPOSE / "grafana" / "dashboards"
    # The dashboard's datasource variable starts on the provisioned datasource.
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    (source,) = [v for v in variables if v["type"] == "datasource"]
    assert (source["query"], source["current"]["value"]) == ("prometheus", datasource["uid"])


# --- Variables and secrets ------------------------------------------------------------------


def test_env_example_documents_every_variable_the_compose_file_references() -> None:
    assert {m["name"] for m in references()} == set(example_env())
    previous = ""
    for line in ENV_EXAMPLE.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            assert previous.startswith("#") or "=" in previous, f"undocumented: {line}"
        previous = line if line.strip() else ""


def test_no_secret_is_committed() -> None:
    """Secrets come from compose/.env only, which git ignores: empty in the example, no default
    in the compose file (which refuses to start without them), only references in every
    secret-named environment entry, none in the image."""
    assert {n: v for n, v in example_env().items() if SECRET.search(n) and v} == {}
    for match in references():
        if SECRET.search(match["name"]):
            assert match["op"] == ":?", f"{match[0]}: a secret takes no default"
    for name, service in services().items():
        for key, value in service.get("environment", {}).items():
            if SECRET.search(key):
                assert any(m["op"] == ":?" for m in REFERENCE.finditer(str(value))), (name, key)
    ignored = subprocess.run(["git", "check-ignore", "-q", "compose/.env"], cwd=REPO, check=False)
    assert ignored.returncode == 0, "git must ignore compose/.env"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert not re.findall(r"^\s*(?:ENV|ARG)\b.*(?:PASSWORD|TOKEN|SECRET)", dockerfile, re.M | re.I)


def setting_field(name: str) -> Any:
    """The settings field ``GRAPH_INGEST_SECTION__FIELD`` sets (None: no such setting)."""
    model: type[BaseModel] = Settings
    *sections, leaf = name.removeprefix("GRAPH_INGEST_").lower().split("__")
    for section in sections:
        field = model.model_fields.get(section)
        if field is None or not isinstance(field.annotation, type):
            return None
        model = field.annotation
    return model.model_fields.get(leaf)


def test_every_default_in_the_compose_file_is_the_settings_own() -> None:
    example = example_env()
    for match in references():
        if match["op"] == ":-":
            assert example[match["name"]] == match["arg"], f"{match[0]} vs .env.example"
        if match["name"].startswith("GRAPH_INGEST_") and match["op"] == ":-":
            field = setting_field(match["name"])
            value = TypeAdapter(field.annotation).validate_python(match["arg"])
            assert value == field.get_default(call_default_factory=True), match[0]


@pytest.mark.parametrize("name", APP_SERVICES)
def test_each_service_gets_a_valid_configuration(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = filled_env()
    for variable in [v for v in os.environ if v.startswith("GRAPH_INGEST_")]:
        monkeypatch.delenv(variable)
    unknown = []
    for key, value in services()[name]["environment"].items():
        if setting_field(key) is None:
            unknown.append(key)
        monkeypatch.setenv(key, interpolate(value, env))
    settings = Settings()  # every value parses, every secret arrives
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    assert settings.neo4j.password is not None and settings.postgres.password is not None
    assert not unknown, f"no such setting: {unknown}"


# --- How the services are run ---------------------------------------------------------------


def test_services_restart_and_start_in_order() -> None:
    found = services()
    healthy = {name for name, s in found.items() if "healthcheck" in s}
    for name, service in found.items():
        assert service["restart"] == ("no" if name == "init" else "unless-stopped"), name
        for dependency, condition in service.get("depends_on", {}).items():
            wanted = (
                "service_healthy" if dependency in healthy else "service_completed_successfully"
            )
            assert condition == {"condition": wanted}, (name, dependency)
    for name in [*WORKERS, "api"]:
        assert found[name]["depends_on"]["init"] == {"condition": "service_completed_successfully"}
        assert name in healthy
    assert found["applier"]["deploy"]["replicas"] == "${APPLIER_REPLICAS:-2}"
    assert "container_name" not in found["applier"]  # replicas need names of their own


def test_the_image_runs_graph_ingest_as_a_user() -> None:
    lines = [line.split(None, 1) for line in (REPO / "Dockerfile").read_text().splitlines()]
    instructions = [(word, rest.strip()) for word, rest in (lf for lf in lines if len(lf) == 2)]
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert froms and all(f.startswith("python:3.11-slim") for f in froms)
    final = instructions[max(i for i, (word, _) in enumerate(instructions) if word == "FROM") :]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert json.loads(next(rest for word, rest in final if word == "ENTRYPOINT")) == [
        "graph-ingest"
    ]
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "**/.env" in ignored and "**" in ignored
