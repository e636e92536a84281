"""LocalStack without services: stale pid files, occupied ports, status of a stopped stack."""

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_ingest.settings import Settings
from graph_ingest.settings.stack import StackSettings
from graph_ingest.stack.errors import PortInUseError, StackError
from graph_ingest.stack.manager import LocalStack
from graph_ingest.stack.process import write_pid


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        stack=StackSettings(
            run_dir=tmp_path / "run",
            cache_dir=tmp_path / "cache",
            kafka_port=free_port(),
            kafka_controller_port=free_port(),
            neo4j_bolt_port=free_port(),
            postgres_port=free_port(),
        )
    )


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def test_constructing_touches_nothing(settings: Settings) -> None:
    LocalStack(settings)

    assert not settings.stack.run_dir.exists()


def test_status_of_a_stack_that_never_ran(settings: Settings) -> None:
    status = LocalStack(settings).status()

    assert not status.ready
    assert [s.name for s in status.services] == ["kafka", "neo4j", "postgres"]
    assert all(s.pid is None and not s.ready for s in status.services)
    payload = status.as_dict()
    assert payload["ready"] is False
    assert payload["services"][0]["port"] == settings.stack.kafka_port
    assert payload["services"][0]["log"].endswith("logs/kafka.log")


def test_a_stale_pid_file_is_ignored_and_cleaned(settings: Settings) -> None:
    stack = LocalStack(settings)
    kafka = stack.service("kafka")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pid_file = stack.layout.pid_file("kafka")
    write_pid(pid_file, dead.pid)

    assert kafka.pid() is None
    kafka.clean_stale()

    assert not pid_file.exists()


def test_a_pid_file_naming_an_unrelated_live_process_is_stale(settings: Settings) -> None:
    stack = LocalStack(settings)
    pid_file = stack.layout.pid_file("neo4j")
    write_pid(pid_file, os.getpid())  # alive, but this pytest is no Neo4j of this stack

    assert stack.status().service("neo4j").pid is None
    assert stack.stop_service("neo4j") is False  # and it is certainly not signalled
    assert not pid_file.exists()


def test_an_occupied_port_is_a_clear_error(settings: Settings, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    stack = LocalStack(
        settings.model_copy(
            update={"stack": settings.stack.model_copy(update={"postgres_port": port})}
        )
    )

    with pytest.raises(PortInUseError, match=rf"port {port} \(postgres\) is in use") as caught:
        stack.start_service("postgres")

    assert "GRAPH_INGEST_STACK__POSTGRES_PORT" in str(caught.value)


def test_unknown_service_name(settings: Settings) -> None:
    with pytest.raises(StackError, match="unknown service 'redis'"):
        LocalStack(settings).start_service("redis")


def test_down_of_a_stopped_stack_is_fine_and_purge_keeps_other_stacks(settings: Settings) -> None:
    stack = LocalStack(settings)
    root = stack.layout.root
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "kafka.log").write_text("x")
    (root / "test-stack" / "kafka").mkdir(parents=True)  # a nested stack must survive a purge

    stack.down()
    assert (root / "logs" / "kafka.log").exists()
    stack.down(purge=True)

    assert not (root / "logs").exists()
    assert (root / "test-stack" / "kafka").is_dir()
