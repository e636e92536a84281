"""Builds an applier worker from settings: the store, the graph writer, the Kafka loop and the
outbox relay beside it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from graph_ingest.consumers.applier import PlanApplier
from graph_ingest.consumers.routing import Ladder
from graph_ingest.consumers.runtime import ApplierWorker
from graph_ingest.graph.base import GraphWriter
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.producers.relay import OutboxRelay
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.postgres import PostgresOperationStore

log = logging.getLogger(__name__)


def postgres_store(settings: Settings) -> PostgresOperationStore:
    return PostgresOperationStore(
        settings.postgres,
        event_encoder=encode_operation,
        operations_topic=settings.topics.operations,
    )


@contextmanager
def started(store: OperationStore, graph: GraphWriter) -> Iterator[None]:
    store.start()
    try:
        graph.start()
        try:
            yield
        finally:
            graph.close()
    finally:
        store.close()


def run_applier(
    settings: Settings,
    stop: threading.Event,
    *,
    store: OperationStore | None = None,
    graph: GraphWriter | None = None,
    relay: bool = True,
) -> None:
    """Run one applier until ``stop`` is set. Store and writer may be injected (tests wrap them).

    ``relay``: also run an outbox relay in this process, so that one process is a complete
    pipeline (retry copies, DLQ envelopes and the operation log all leave through the outbox).
    Relays of one schema elect one active among them; the others stand by."""
    store = store or postgres_store(settings)
    graph = graph or Neo4jGraphWriter(settings.neo4j)
    with (
        started(store, graph),
        _relay_beside(settings, stop, enabled=relay),
        DegradationPublisher(settings) as degradation,
    ):
        worker = ApplierWorker(
            settings,
            build_applier(settings, store, graph),
            report_degradation=degradation.publish,
        )
        worker.run(stop)


@contextmanager
def _relay_beside(settings: Settings, stop: threading.Event, *, enabled: bool) -> Iterator[None]:
    """An outbox relay thread while the block runs; it stops when the block ends, however."""
    if not enabled:
        yield
        return
    relay = OutboxRelay(settings)
    relay.start()
    relay_stop = threading.Event()

    def run() -> None:
        try:
            relay.run(relay_stop)
        except Exception:
            log.exception("the outbox relay beside the applier stopped; stopping the applier")
            stop.set()

    thread = threading.Thread(target=run, name="outbox-relay", daemon=True)
    thread.start()
    try:
        yield
    finally:
        relay_stop.set()
        thread.join(timeout=settings.relay.flush_timeout_s + 30)
        relay.close()


def build_applier(settings: Settings, store: OperationStore, graph: GraphWriter) -> PlanApplier:
    return PlanApplier(
        store, graph, ladder=Ladder.of(settings), worker_id=settings.applier.worker_id
    )
