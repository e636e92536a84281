"""Stopping the worker processes a test started: by pid, gracefully first."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path


def stop_gracefully(processes: Iterable[subprocess.Popen[bytes]], timeout_s: float = 60) -> None:
    """SIGTERM every process still running, wait for each; kill one that does not leave in time."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def dump_stacks(process: subprocess.Popen[bytes], log: Path) -> str:
    """SIGABRT ``process`` (started with PYTHONFAULTHANDLER=1: it writes every thread's stack to
    its stderr, ``log``) and return the end of that log: where a hung worker waits."""
    if process.poll() is None:
        process.send_signal(signal.SIGABRT)
        process.wait(timeout=30)
    return log.read_text(errors="replace")[-8000:]
