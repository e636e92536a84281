"""`graph-ingest stack` through click's CliRunner, without services."""

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Env of a stack in tmp_path whose four ports are all held by listeners of this test."""
    socks = []
    for _ in range(4):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        socks.append(sock)
    ports = [s.getsockname()[1] for s in socks]
    yield {
        "GRAPH_INGEST_STACK__RUN_DIR": str(tmp_path / "run"),
        "GRAPH_INGEST_STACK__CACHE_DIR": str(tmp_path / "cache"),
        "GRAPH_INGEST_STACK__KAFKA_PORT": str(ports[0]),
        "GRAPH_INGEST_STACK__KAFKA_CONTROLLER_PORT": str(ports[1]),
        "GRAPH_INGEST_STACK__NEO4J_BOLT_PORT": str(ports[2]),
        "GRAPH_INGEST_STACK__POSTGRES_PORT": str(ports[3]),
    }
    for sock in socks:
        sock.close()


def test_help_lists_the_commands_with_examples() -> None:
    result = CliRunner().invoke(cli, ["stack", "--help"])

    assert result.exit_code == 0
    for command in ("up", "status", "down"):
        assert command in result.output
    assert "graph-ingest stack status --json" in result.output


def test_status_json_of_a_stopped_stack(env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["stack", "status", "--json"], env=env)

    assert result.exit_code == ExitCode.UNAVAILABLE
    payload = json.loads(result.stdout)
    assert payload["ready"] is False
    assert {s["name"]: s["ready"] for s in payload["services"]} == {
        "kafka": False,
        "neo4j": False,
        "postgres": False,
    }


def test_up_with_ports_taken_fails_with_a_one_line_message(env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["stack", "up"], env=env)

    assert result.exit_code == ExitCode.ERROR
    errors = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("error [FAILED_PRECONDITION]: ")
    ]
    assert len(errors) == 1
    assert "is in use by another process" in errors[0]
    assert env["GRAPH_INGEST_STACK__NEO4J_BOLT_PORT"] in errors[0]


def test_invalid_setting_is_a_usage_error(env: dict[str, str]) -> None:
    result = CliRunner().invoke(
        cli, ["stack", "status"], env={**env, "GRAPH_INGEST_STACK__KAFKA_PORT": "not-a-port"}
    )

    assert result.exit_code == ExitCode.USAGE
    assert "stack.kafka_port" in result.stderr


def test_down_when_nothing_runs(env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["stack", "down"], env=env)

    assert result.exit_code == 0
    assert "stack down" in result.stdout
