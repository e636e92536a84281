"""The local stack as a whole: up (in parallel), status, down, and one service at a time."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from graph_ingest.settings import Settings
from graph_ingest.stack.errors import StackError
from graph_ingest.stack.kafka import KafkaService
from graph_ingest.stack.layout import SERVICE_NAMES, StackLayout
from graph_ingest.stack.locks import FileLock
from graph_ingest.stack.neo4j import Neo4jService
from graph_ingest.stack.postgres import PostgresService
from graph_ingest.stack.service import Report, Service, ServiceStatus

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class StackStatus:
    run_dir: Path
    services: tuple[ServiceStatus, ...]

    @property
    def ready(self) -> bool:
        """True when every service runs and answers."""
        return all(s.ready for s in self.services)

    def service(self, name: str) -> ServiceStatus:
        for status in self.services:
            if status.name == name:
                return status
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "ready": self.ready,
            "services": [s.as_dict() for s in self.services],
        }


class LocalStack:
    """Kafka, Neo4j and PostgreSQL as local processes under ``settings.stack.run_dir``.

    Every public method holds an inter-process lock on the run directory, so two ``up`` calls
    (two terminals, two test sessions) do not start a service twice. Constructing the object
    touches nothing.
    """

    def __init__(self, settings: Settings, *, report: Report | None = None) -> None:
        self.settings = settings
        self.layout = StackLayout.from_settings(settings.stack)
        self._lock = FileLock(self.layout.lock_file)
        self._services: dict[str, Service] = {
            cls.name: cls(settings.stack, self.layout, report)
            for cls in (KafkaService, Neo4jService, PostgresService)
        }

    @property
    def names(self) -> tuple[str, ...]:
        return SERVICE_NAMES

    def service(self, name: str) -> Service:
        try:
            return self._services[name]
        except KeyError:
            raise StackError(
                f"unknown service {name!r}; expected one of {', '.join(SERVICE_NAMES)}"
            ) from None

    def up(self) -> StackStatus:
        """Start whatever is not running (jar fetches and JVM starts overlap); wait until every
        service answers a real client. Idempotent: running services are left alone."""
        started = time.monotonic()
        with self._lock.held():
            self._each(lambda s: s.ensure_running())
            status = self._status()
        logger.info("stack up in %.1f s", time.monotonic() - started)
        return status

    def status(self) -> StackStatus:
        return self._status()

    def down(self, *, purge: bool = False) -> None:
        """Stop every service of this stack (by pid, gracefully); ``purge`` also deletes its data
        and logs."""
        with self._lock.held():
            self._each(lambda s: s.stop())
            if purge:
                homes = [
                    s.home for s in self._services.values()
                ]  # some may live outside the run dir
                for folder in {*self.layout.owned_dirs(), *homes}:
                    shutil.rmtree(folder, ignore_errors=True)

    def start_service(self, name: str) -> ServiceStatus:
        """Start one service (if not running) and wait until it answers."""
        service = self.service(name)
        with self._lock.held():
            return service.ensure_running()

    def stop_service(self, name: str, *, hard: bool = False) -> bool:
        """Stop one service; ``hard`` simulates a crash (SIGKILL, or PostgreSQL's immediate
        shutdown). Returns True if it was running."""
        service = self.service(name)
        with self._lock.held():
            return service.stop(hard=hard)

    def _status(self) -> StackStatus:
        statuses = self._each(lambda s: s.status())
        return StackStatus(self.layout.root, tuple(statuses))

    def _each(self, action: Callable[[Service], T]) -> list[T]:
        """Run ``action`` on every service in parallel; re-raise failures once all are done."""
        services = [self._services[n] for n in SERVICE_NAMES]
        with ThreadPoolExecutor(len(services), thread_name_prefix="stack") as pool:
            futures = [pool.submit(action, s) for s in services]
            errors = [f.exception() for f in futures]
        failed = [e for e in errors if e is not None]
        if len(failed) == 1:
            raise failed[0]
        if failed:
            raise StackError(
                "; ".join(str(e).splitlines()[0] for e in failed),
                details="\n\n".join(
                    getattr(e, "details", "") for e in failed if getattr(e, "details", "")
                ),
            ) from failed[0]
        return [f.result() for f in futures]
