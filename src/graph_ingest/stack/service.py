"""What every local service has in common: status, start with a readiness wait, stop."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_ingest.settings.stack import StackSettings
from graph_ingest.stack.errors import PortInUseError, StartupError
from graph_ingest.stack.layout import StackLayout
from graph_ingest.stack.process import describe_port_use, is_running, port_in_use, tail

logger = logging.getLogger(__name__)

Report = Callable[[str], None]
PROBE_TIMEOUT_S = 5.0
RETRY_INTERVAL_S = 0.2


def _silent(_: str) -> None:
    pass


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    port: int
    pid: int | None
    ready: bool
    log_path: Path

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "running": self.running,
            "ready": self.ready,
            "pid": self.pid,
            "port": self.port,
            "address": self.address,
            "log": str(self.log_path),
        }


class Service(ABC):
    """One local service. Subclasses say how to launch, find, probe and halt their process."""

    name: str
    port_fields: tuple[str, ...]  # StackSettings fields of the ports it binds (first = main)

    def __init__(self, settings: StackSettings, layout: StackLayout, report: Report | None = None):
        self.settings = settings
        self.layout = layout
        self.report = report or _silent

    @property
    def port(self) -> int:
        return int(getattr(self.settings, self.port_fields[0]))

    @property
    def log_path(self) -> Path:
        return self.layout.log_file(self.name)

    @property
    def home(self) -> Path:
        return self.layout.service_dir(self.name)

    @abstractmethod
    def pid(self) -> int | None:
        """The pid of this stack's live process for the service, or None."""

    @abstractmethod
    def probe(self, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        """One real readiness check with a client (True when the service answers)."""

    @abstractmethod
    def clean_stale(self) -> None:
        """Forget a process that is gone (stale pid file)."""

    @abstractmethod
    def launch(self) -> None:
        """Prepare files (jars, config, data dir) and start the process; do not wait."""

    @abstractmethod
    def halt(self, pid: int, *, hard: bool) -> None:
        """Stop the running process ``pid``; ``hard`` simulates a crash."""

    def status(self) -> ServiceStatus:
        pid = self.pid()
        ready = pid is not None and self.probe(timeout_s=2.0)
        return ServiceStatus(self.name, self.port, pid, ready, self.log_path)

    def ensure_running(self) -> ServiceStatus:
        """Start the service unless this stack's process already runs; wait until it answers."""
        pid = self.pid()
        if pid is None:
            self.clean_stale()
            self.check_ports()
            started = time.monotonic()
            self.launch()
            pid = self.pid()
            logger.info(
                "%s launched (pid %s) in %.1f s", self.name, pid, time.monotonic() - started
            )
        else:
            self.report(f"{self.name}: already running (pid {pid})")
        self.wait_ready()
        return ServiceStatus(self.name, self.port, self.pid(), True, self.log_path)

    def stop(self, *, hard: bool = False) -> bool:
        """Stop the service if it runs. Returns True if something was stopped."""
        pid = self.pid()
        if pid is not None:
            self.report(f"{self.name}: stopping pid {pid}{' (SIGKILL)' if hard else ''}")
            self.halt(pid, hard=hard)
        self.clean_stale()
        return pid is not None

    def check_ports(self) -> None:
        for field in self.port_fields:
            port = int(getattr(self.settings, field))
            if port_in_use(port):
                raise PortInUseError(
                    f"port {port} ({self.name}) is in use by another process "
                    f"[{describe_port_use(port)}]; stop it or choose another port with "
                    f"GRAPH_INGEST_STACK__{field.upper()}"
                )

    def wait_ready(self) -> None:
        timeout = self.settings.startup_timeout_s
        deadline = time.monotonic() + timeout
        while True:
            pid = self.pid()
            if pid is None or not is_running(pid):
                raise StartupError(
                    f"{self.name} exited during startup; see {self.log_path}",
                    details=tail(self.log_path),
                )
            remaining = deadline - time.monotonic()
            if self.probe(timeout_s=max(0.5, min(PROBE_TIMEOUT_S, remaining))):
                return
            if time.monotonic() >= deadline:
                raise StartupError(
                    f"{self.name} did not become ready within {timeout:.0f} s; see {self.log_path}",
                    details=tail(self.log_path),
                )
            time.sleep(RETRY_INTERVAL_S)
