"""What the API's routes call, opened once per app (in its lifespan) and closed on shutdown: the
write store (DLQ index, purge, audit log), the read tables and their read service, and the DLQ
replayer with the Kafka producer it publishes through.

The changes an operator makes (replay, purge) are carried out here, once, for the JSON routes
and the console alike: one at a time, and each recorded in the audit log with who (the token's
name) and why.

Redrive tasks started through the API run on threads of this process. When the API shuts down
it cancels each one still running (audited as a cancel by ``graph-ingest serve``) and waits up
to ``TASK_STOP_TIMEOUT_S`` for it to end CANCELLED after the entry in hand, before the store and
the producer close; one that does not end by then (a publish hung on an outage) is left to go
stale: its heartbeat stops and the next start, list or read ends it FAILED, its entries marked
REPLAYED as far as it got."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import Request

from graph_ingest.api.errors import ApiError
from graph_ingest.dlq.audit import Audit, AuditAction, required_reason
from graph_ingest.dlq.purge import Purged, purge
from graph_ingest.dlq.replayer import DlqReplayer, ReplayItem
from graph_ingest.dlq.tasks import RedriveTasks, RunningTask
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.projections.documents import DocumentQueries
from graph_ingest.projections.errors_report import ErrorsReports
from graph_ingest.projections.queries import OperationQueries
from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings
from graph_ingest.store.audit import AuditLog
from graph_ingest.store.base import OperationStore
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.redrive_tasks import RedriveTaskStore

log = logging.getLogger(__name__)

TASK_STOP_TIMEOUT_S = 10.0
"""How long a shutdown waits for the redrive tasks it cancelled to end."""
SHUTDOWN = "graph-ingest serve"


class ApiStore(OperationStore, AuditLog, RedriveTaskStore, Protocol):
    """What the API needs of the write store (``wiring.postgres_store`` builds one)."""


StoreFactory = Callable[[Settings], ApiStore]
"""Builds the (unstarted) write store: ``wiring.postgres_store``, which the API may not import."""


@dataclass(frozen=True)
class ApiServices:
    settings: Settings
    store: ApiStore
    tables: ReadTables
    queries: OperationQueries
    documents: DocumentQueries
    errors: ErrorsReports
    replayer: DlqReplayer
    audit: Audit
    redrive: RedriveTasks
    changing: threading.Lock = field(default_factory=threading.Lock)
    """Held by each replay and purge: one change to the DLQ at a time, as the CLI makes them."""
    runs: list[RunningTask] = field(default_factory=list)
    """The redrive tasks this process started (each ends, or is cancelled at shutdown)."""

    def start_redrive(
        self, selection: DlqQuery, *, rate: float | None, by: str, reason: str | None
    ) -> RunningTask:
        """Start a redrive task on a thread of this process (audited); TaskAlreadyRunning,
        naming it, while another runs on this DLQ."""
        running = self.redrive.start(selection, rate=rate, by=by, reason=reason)
        self.runs[:] = [r for r in self.runs if not r.wait(0)] + [running]
        return running

    def stop_redrives(self, timeout_s: float = TASK_STOP_TIMEOUT_S) -> None:
        """Cancel the tasks still running here and wait for them to end (at most
        ``timeout_s`` in all); one that does not end goes stale (the module says how)."""
        left = [r for r in self.runs if not r.wait(0)]
        for running in left:
            try:
                self.redrive.cancel(running.task.task_id, by=SHUTDOWN, reason="the API shut down")
            except GraphIngestError as exc:  # not recorded: stop the runner all the same
                log.warning("redrive %s: cancel not recorded: %s", running.task.task_id, exc)
                running.stop.set()
        deadline = time.monotonic() + timeout_s
        for running in left:
            if not running.wait(max(deadline - time.monotonic(), 0.0)):
                log.warning("redrive %s did not stop: it goes stale", running.task.task_id)

    def replay(self, dlq_id: str, *, force: bool, by: str, reason: str, via: str) -> ReplayItem:
        """Replay the entry as ``by`` (a token's name) and audit it; ``via`` (where it was asked:
        "through the API", "in the console") and ``reason`` go into the entry's note too."""
        with self.changing:
            item = self.replayer.replay(dlq_id, force=force, by=f"{by} {via}: {reason.strip()}")
            self.audit.record(
                action=AuditAction.DLQ_REPLAY,
                by=by,
                target=[dlq_id],
                reason=reason,
                details={"force": force, "source": str(item.source), "via": via},
            )
        return item

    def purge(
        self, dlq_id: str, *, force: bool, by: str, reason: str | None, via: str
    ) -> tuple[Purged, str]:
        """Purge the entry as ``by`` and audit it; what it did and the note it was resolved
        with. MissingReason, before anything changes, when ``reason`` is blank."""
        why = required_reason(AuditAction.DLQ_PURGE, reason)
        note = f"{why} (purged by {by} {via})"
        with self.changing:
            purged = purge(self.store, self.settings.topics.dlq, dlq_id, note, force=force)
            self.audit.record(
                action=AuditAction.DLQ_PURGE,
                by=by,
                target=[dlq_id],
                reason=why,
                details={
                    "force": force,
                    "via": via,
                    "conflicted": [f.operation_id for f in purged.followers],
                },
            )
        return purged, note


@contextmanager
def open_services(settings: Settings, new_store: StoreFactory) -> Iterator[ApiServices]:
    """The services, started; each one opened is closed when the block ends, however."""
    with ExitStack() as opened:
        store = new_store(settings)
        store.start()
        opened.callback(store.close)
        tables = ReadTables(settings.postgres)
        tables.start()
        opened.callback(tables.close)
        producer = KafkaProducer(settings.kafka, flush_timeout_s=settings.dlq.publish_timeout_s)
        opened.callback(producer.close)  # started by the first replay
        replayer = DlqReplayer(store, producer, settings)
        audit = Audit(store)
        services = ApiServices(
            settings=settings,
            store=store,
            tables=tables,
            queries=OperationQueries(tables, committed=store),
            documents=DocumentQueries(tables),
            errors=ErrorsReports(tables),
            replayer=replayer,
            audit=audit,
            redrive=RedriveTasks(store, replayer, audit, dlq_topic=settings.topics.dlq),
        )
        opened.callback(services.stop_redrives)  # first: the tasks end before what they use
        yield services


def services_of(request: Request) -> ApiServices:
    """The route dependency: the services of the app serving ``request``."""
    services: ApiServices | None = request.app.state.services
    if services is None:
        raise ApiError(
            "the API is starting or stopping: its services are not open",
            code=StatusCode.UNAVAILABLE,
        )
    return services


__all__ = ["ApiServices", "ApiStore", "StoreFactory", "open_services", "services_of"]
