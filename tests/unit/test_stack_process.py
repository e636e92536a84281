"""Pid files, liveness, stopping and port checks, with throwaway local processes."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_ingest.stack import process
from graph_ingest.stack.process import (
    describe_port_use,
    is_ours,
    is_running,
    port_in_use,
    read_pid,
    spawn,
    start_bound,
    tail,
    terminate,
    wait_until,
    write_pid,
)

pytestmark = pytest.mark.timeout(60)

SLEEPER = "import signal, sys, time; {setup}; print('ready', flush=True); time.sleep(300)"


def sleeper(setup: str = "pass") -> list[str]:
    return [sys.executable, "-c", SLEEPER.format(setup=setup)]


def says_ready(log: Path) -> bool:
    """The line the sleeper prints (the log's header line also quotes the word)."""
    return "ready" in log.read_text().splitlines()


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A live process that was not started by ``spawn`` (as after a restart of the tool)."""
    marker = tmp_path / "marker-arg"
    proc = subprocess.Popen([*sleeper(), str(marker)], stdout=subprocess.DEVNULL)
    yield proc
    proc.kill()
    proc.wait()


def test_pid_file_round_trip_and_garbage(tmp_path: Path) -> None:
    path = tmp_path / "pids" / "x.pid"

    assert read_pid(path) is None
    write_pid(path, 4242)
    assert read_pid(path) == 4242
    path.write_text("not a pid\n")
    assert read_pid(path) is None
    path.write_text("")
    assert read_pid(path) is None
    path.write_text("-5\n")
    assert read_pid(path) is None


def test_spawn_logs_and_records_pid_then_terminate_stops_it(tmp_path: Path) -> None:
    log, pid_file = tmp_path / "logs" / "s.log", tmp_path / "pids" / "s.pid"

    pid = spawn(sleeper(), log_path=log, pid_path=pid_file)

    assert read_pid(pid_file) == pid
    assert is_running(pid)
    assert wait_until(lambda: says_ready(log), timeout_s=20)
    assert terminate(pid, timeout_s=20) is False  # stopped by SIGTERM, no SIGKILL needed
    assert not is_running(pid)


def test_terminate_kills_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    pid = spawn(
        sleeper("signal.signal(signal.SIGTERM, signal.SIG_IGN)"),
        log_path=log,
        pid_path=tmp_path / "s.pid",
    )
    assert wait_until(lambda: says_ready(log), timeout_s=20)

    started = time.monotonic()
    assert terminate(pid, timeout_s=0.5) is True

    assert not is_running(pid)
    assert time.monotonic() - started < 10


def test_a_zombie_counts_as_dead(tmp_path: Path) -> None:
    proc = subprocess.Popen(sleeper(), stdout=subprocess.DEVNULL)
    proc.send_signal(signal.SIGKILL)
    # Not waited for: until reaped, the kernel keeps it as a zombie with the same pid.
    assert wait_until(lambda: not is_running(proc.pid), timeout_s=10)
    proc.wait()


def test_is_ours_checks_the_command_line_of_processes_we_did_not_spawn(
    stranger: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    assert is_ours(stranger.pid, str(tmp_path / "marker-arg"))
    assert not is_ours(stranger.pid, str(tmp_path / "some-other-stack"))


def test_is_ours_is_false_for_a_dead_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()

    assert not is_ours(proc.pid, "anything")


def test_port_in_use_sees_a_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use(port)
    assert wait_until(lambda: not port_in_use(port), timeout_s=5)


def test_describe_port_use_names_the_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]

        assert f"pid {os.getpid()} (" in describe_port_use(port)
        assert "listens on it" in describe_port_use(port)


def test_tail_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))

    assert tail(log, 3).splitlines() == ["line 9997", "line 9998", "line 9999"]
    assert "does not exist" in tail(tmp_path / "missing.log")


def test_log_is_rotated_when_it_grows_too_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "LOG_ROTATE_BYTES", 10)
    log = tmp_path / "s.log"
    log.write_text("old content, more than ten bytes\n")

    pid = spawn([sys.executable, "-c", "pass"], log_path=log, pid_path=tmp_path / "s.pid")

    assert wait_until(lambda: not is_running(pid), timeout_s=20)
    assert "old content" in (tmp_path / "s.log.1").read_text()
    assert "old content" not in log.read_text()


# A parent that starts a bound sleeper, prints its pid and exits at once (no cleanup of its own).
BOUND_PARENT = """
import subprocess, sys
from graph_ingest.stack.process import start_bound
child = start_bound(
    [sys.executable, "-c", "import time; time.sleep(300)"],
    stdout=subprocess.DEVNULL,  # not this process's pipe: the test reads it to its end
    stderr=subprocess.DEVNULL,
)
print(child.pid, flush=True)
"""


def test_a_bound_child_ends_with_the_process_that_started_it() -> None:
    parent = subprocess.run(
        [sys.executable, "-c", BOUND_PARENT], capture_output=True, text=True, check=True
    )
    child = int(parent.stdout)
    try:
        assert wait_until(lambda: not is_running(child), timeout_s=20)
    finally:
        if is_running(child) and is_ours(child, "time.sleep(300)"):
            os.kill(child, signal.SIGKILL)


def test_a_bound_child_is_started_from_the_main_thread_only() -> None:
    raised: list[BaseException] = []

    def start() -> None:
        try:
            start_bound(sleeper())
        except RuntimeError as exc:
            raised.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(timeout=30)
    assert [str(e) for e in raised] == [
        "start_bound from the main thread only: its child dies with the thread"
    ]
