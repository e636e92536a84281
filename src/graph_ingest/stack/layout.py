"""Where the local stack keeps its files: one run directory, one folder per concern."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graph_ingest.settings.stack import StackSettings

SERVICE_NAMES = ("kafka", "neo4j", "postgres")


@dataclass(frozen=True)
class StackLayout:
    """Absolute paths under ``run_dir``: kafka/, neo4j/, postgres/, logs/, pids/."""

    root: Path

    @classmethod
    def from_settings(cls, settings: StackSettings) -> StackLayout:
        return cls(settings.run_dir.expanduser().resolve())

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def lock_file(self) -> Path:
        return self.root / "stack.lock"

    def service_dir(self, name: str) -> Path:
        return self.root / name

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def pid_file(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def owned_dirs(self) -> list[Path]:
        """The folders ``down --purge`` may delete (never the run directory itself, which can
        hold other stacks, e.g. the test stack under ``.graph-ingest/test-stack``)."""
        return [*(self.service_dir(n) for n in SERVICE_NAMES), self.logs, self.pids]
