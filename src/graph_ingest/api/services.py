"""What the API's routes call, opened once per app (in its lifespan) and closed on shutdown: the
write store (DLQ index, purge), the read tables and their read service, and the DLQ replayer
with the Kafka producer it publishes through."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import Request

from graph_ingest.api.errors import ApiError
from graph_ingest.dlq.audit import Audit
from graph_ingest.dlq.replayer import DlqReplayer
from graph_ingest.dlq.tasks import RedriveTasks
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.projections.queries import OperationQueries
from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings
from graph_ingest.store.audit import AuditLog
from graph_ingest.store.base import OperationStore
from graph_ingest.store.redrive_tasks import RedriveTaskStore


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
    replayer: DlqReplayer
    redrive: RedriveTasks
    """Redrive tasks on this DLQ, run in the API's process (the console starts them)."""
    changing: threading.Lock = field(default_factory=threading.Lock)
    """Held by each replay and purge: one change to the DLQ at a time, as the CLI makes them."""


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
        yield ApiServices(
            settings=settings,
            store=store,
            tables=tables,
            queries=OperationQueries(tables, committed=store),
            replayer=replayer,
            redrive=RedriveTasks(store, replayer, Audit(store), dlq_topic=settings.topics.dlq),
        )


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
