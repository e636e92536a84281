"""An applier process for crash tests: the real applier, halted at a chosen point so the test can
SIGKILL it there. Settings come from the environment (GRAPH_INGEST_*), like a deployed worker.

    python -m tests.crash.applier_process MARKER_FILE \
        {after-graph-write|before-state-commit|neo4j-down|flaky|none}

``after-graph-write``: the Neo4j transaction has committed, GRAPH_APPLIED is not yet recorded.
``before-state-commit``: GRAPH_APPLIED is recorded, the state transaction is open, not committed.
``neo4j-down``: every graph write fails as if Neo4j were unreachable (the applier retries in place,
its partitions paused, until it is stopped); MARKER_FILE is written at the first failure.
``flaky``: a graph write that touches a node whose id contains ``retry`` fails with
DEADLINE_EXCEEDED while the file named by $FLAKY_WHILE exists (plans walk the retry tiers, and
complete once the test removes it); MARKER_FILE is written at the first failure.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graph_ingest.cli.signals import stop_on_signals
from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import GraphError, GraphUnavailable
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.wiring import postgres_store, run_applier


def halt(marker: Path) -> None:
    marker.write_text("halted")
    while True:  # the test SIGKILLs us here
        time.sleep(1)


class HaltAfterGraphWrite(Neo4jGraphWriter):
    def __init__(self, marker: Path, *args: Any) -> None:
        super().__init__(*args)
        self._marker = marker

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        super().apply(batch)
        halt(self._marker)


class Neo4jDown(Neo4jGraphWriter):
    def __init__(self, marker: Path, *args: Any) -> None:
        super().__init__(*args)
        self._marker = marker

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        self._marker.write_text("failing")
        raise GraphUnavailable("injected: Neo4j is down")


class Flaky(Neo4jGraphWriter):
    def __init__(self, marker: Path, while_exists: Path, *args: Any) -> None:
        super().__init__(*args)
        self._marker = marker
        self._while_exists = while_exists

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        touched = (n.node_id for _, m in batch for n in m.node_upserts)
        if any("retry" in node for node in touched) and self._while_exists.exists():
            self._marker.write_text("failing")
            raise GraphError("injected: a transient timeout", code=StatusCode.DEADLINE_EXCEEDED)
        super().apply(batch)


class _HaltingUnitOfWork:
    def __init__(self, inner: UnitOfWork, marker: Path) -> None:
        self._inner = inner
        self._marker = marker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def commit_document_states(self, states: Sequence[DocumentState]) -> set[tuple[str, str]]:
        if states:
            halt(self._marker)
        return self._inner.commit_document_states(states)


class HaltBeforeStateCommit(PostgresOperationStore):
    def __init__(self, marker: Path, settings: Settings) -> None:
        super().__init__(
            settings.postgres,
            event_encoder=encode_operation,
            operations_topic=settings.topics.operations,
        )
        self.marker = marker

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        with super().unit_of_work() as uow:
            yield _HaltingUnitOfWork(uow, self.marker)


def main(marker: Path, mode: str) -> None:
    settings = Settings()
    store: PostgresOperationStore = postgres_store(settings)
    graph = Neo4jGraphWriter(settings.neo4j)
    if mode == "after-graph-write":
        graph = HaltAfterGraphWrite(marker, settings.neo4j)
    elif mode == "before-state-commit":
        store = HaltBeforeStateCommit(marker, settings)
    elif mode == "neo4j-down":
        graph = Neo4jDown(marker, settings.neo4j)
    elif mode == "flaky":
        graph = Flaky(marker, Path(os.environ["FLAKY_WHILE"]), settings.neo4j)
    run_applier(settings, stop_on_signals(), store=store, graph=graph)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
