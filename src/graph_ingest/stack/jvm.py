"""A service that is one java process started by the stack, tracked by a pid file."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

from graph_ingest.stack.jars import ensure_jars
from graph_ingest.stack.java import find_java
from graph_ingest.stack.process import is_ours, read_pid, remove_pid, spawn, terminate
from graph_ingest.stack.service import Service


class JvmService(Service):
    version_field: str  # StackSettings field of the version to fetch

    @property
    def pid_path(self) -> Path:
        return self.layout.pid_file(self.name)

    @property
    @abstractmethod
    def marker(self) -> str:
        """A path on the java command line that identifies this stack's process."""

    @abstractmethod
    def prepare(self, java: str, libs: Path) -> None:
        """Write config files and initialise data directories."""

    @abstractmethod
    def command(self, java: str, libs: Path) -> list[str]:
        """The java command line."""

    def pid(self) -> int | None:
        pid = read_pid(self.pid_path)
        return pid if pid is not None and is_ours(pid, self.marker) else None

    def clean_stale(self) -> None:
        if self.pid_path.exists() and self.pid() is None:
            self.report(f"{self.name}: removing stale pid file {self.pid_path}")
            remove_pid(self.pid_path)

    def jars(self) -> Path:
        version = str(getattr(self.settings, self.version_field))
        return ensure_jars(
            self.name,
            version,
            cache_dir=self.settings.cache_dir,
            log_path=self.layout.logs / f"mvn-{self.name}.log",
            maven_repo=self.settings.maven_repo,
            report=self.report,
        )

    def launch(self) -> None:
        java = find_java()
        libs = self.jars()
        self.home.mkdir(parents=True, exist_ok=True)
        self.prepare(java, libs)
        spawn(
            self.command(java, libs), log_path=self.log_path, pid_path=self.pid_path, cwd=self.home
        )

    def halt(self, pid: int, *, hard: bool) -> None:
        terminate(pid, timeout_s=self.settings.stop_timeout_s, hard=hard)
        remove_pid(self.pid_path)
