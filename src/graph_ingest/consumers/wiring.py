"""Builds an applier worker from settings: the store, the graph writer and the Kafka loop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from graph_ingest.consumers.applier import PlanApplier
from graph_ingest.consumers.runtime import ApplierWorker
from graph_ingest.graph.base import GraphWriter
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.postgres import PostgresOperationStore


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
) -> None:
    """Run one applier until ``stop`` is set. Store and writer may be injected (tests wrap them)."""
    store = store or postgres_store(settings)
    graph = graph or Neo4jGraphWriter(settings.neo4j)
    with started(store, graph):
        applier = PlanApplier(store, graph, plans_topic=settings.topics.plans)
        ApplierWorker(settings, applier).run(stop)
