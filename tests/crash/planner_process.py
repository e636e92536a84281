"""A planner worker process for crash tests: the real worker with the test planner, halted (if
asked) with its batch's plans written to the plans topic and its transaction still open, so the
test can SIGKILL it there; or (``store-outage``) writing MARKER_FILE when a replan's store read
meets PostgreSQL down, so an outage test knows the worker has met it. Settings come from the
environment (GRAPH_INGEST_*).

    python -m tests.crash.planner_process MARKER_FILE {before-commit|store-outage|none}
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from graph_ingest.cli.signals import stop_on_signals
from graph_ingest.consumers.planner.takeover import planner_producer
from graph_ingest.consumers.planner.worker import PlannerWorker
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.store.errors import StoreUnavailable
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.store.submissions import Submission
from graph_ingest.wiring import postgres_store
from tests.crash.applier_process import halt
from tests.planners import build


class HaltBeforeCommit(TransactionalProducer):
    def __init__(self, marker: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._marker = marker

    def _commit(self, client: Producer, deadline: float) -> None:
        client.flush(30)  # every message of the transaction is on the broker, uncommitted
        halt(self._marker)


class OutageMarkingStore(PostgresOperationStore):
    """The real store, writing ``marker`` when the newest submission cannot be read because
    PostgreSQL is unavailable."""

    def __init__(self, marker: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._marker = marker

    def newest_submission(self, space: str, document_id: str) -> Submission | None:
        try:
            return super().newest_submission(space, document_id)
        except StoreUnavailable:
            self._marker.touch()
            raise


def main(marker: Path, mode: str) -> None:
    settings = Settings()
    producer = planner_producer(settings)
    if mode == "before-commit":
        producer = HaltBeforeCommit(
            marker,
            settings.kafka,
            settings.planner.transactional_id,
            timeout_s=settings.planner.transaction_timeout_s,
        )
    store = postgres_store(settings)
    if mode == "store-outage":
        store = OutageMarkingStore(
            marker,
            settings.postgres,
            event_encoder=encode_operation,
            operations_topic=settings.topics.operations,
        )
    store.start()
    try:
        PlannerWorker(settings, build(settings), store, producer=producer).run(stop_on_signals())
    finally:
        store.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
