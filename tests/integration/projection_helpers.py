"""What the projection tests share: a pipeline's projector settings and environment, its read
tables (dropped at teardown), operation events sent straight to its operations topic, and the
read table as rows to compare."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Message, Producer
from psycopg.rows import dict_row

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.tables import ReadTables, read_schema
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import position
from tests.operation_histories import PATHS, history
from tests.samples import Entity, Relation, sample_plan

REPO = Path(__file__).resolve().parents[2]


def projector_settings(pipeline: Pipeline) -> Settings:
    """The pipeline's settings with a projector group of this test alone."""
    settings = pipeline.settings
    projector = settings.projector.model_copy(
        update={"group_id": f"{settings.applier.group_id}.projector", "batch_linger_s": 0.02}
    )
    return settings.model_copy(update={"projector": projector})


BABBAGE = Entity("Person", "Babbage")
"""Named only in the first of ``alice_plans``: a writer failing on him dead-letters that one."""


def alice_plans(pipeline: Pipeline, count: int) -> list[IngestionPlan]:
    """``count`` plans of documents saying Alice works at Acme, the first naming Babbage too."""
    alice, acme = Entity("Person", "Alice"), Entity("Company", "Acme")
    return [
        sample_plan(
            "it",
            f"doc-{i}",
            "Alice works at Acme.",
            [alice, acme, *([BABBAGE] if i == 0 else [])],
            [Relation(alice, "WORKS_AT", acme)],
            graph=pipeline.graph,
        )
        for i in range(count)
    ]


def projector_env(pipeline: Pipeline) -> dict[str, str]:
    """``pipeline.env()`` plus the projector group of ``projector_settings``."""
    group = projector_settings(pipeline).projector.group_id
    return {**pipeline.env(), "GRAPH_INGEST_PROJECTOR__GROUP_ID": group}


@contextmanager
def opened_read_tables(settings: Settings) -> Iterator[ReadTables]:
    """The read tables of ``settings`` (migrated with its store: its pipeline's teardown drops
    them), started for the block."""
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        yield tables
    finally:
        tables.close()


TOPIC = "ops"
"""The topic of events folded without Kafka (``at_offsets``)."""


def at_offsets(operations: Sequence[Operation], partition: int = 0) -> list[OperationEvent]:
    """``operations`` as consumed events, at offsets 0, 1, … of one partition of ``TOPIC``."""
    return [OperationEvent(TOPIC, partition, i, op) for i, op in enumerate(operations)]


def fold_in_batches(tables: ReadTables, events: Sequence[OperationEvent], size: int) -> None:
    for first in range(0, len(events), size):
        tables.fold(events[first : first + size])


def send_operations(
    settings: Settings, events: Sequence[Operation | bytes]
) -> list[tuple[str, int, int]]:
    """Publish operation snapshots (bytes: a message that is none) as the relay does, keyed by
    operation id (garbage keyed ``garbage``); where each landed (topic, partition, offset)."""
    producer = Producer(settings.kafka.producer_config())
    landed: list[tuple[str, int, int]] = []

    def delivered(error: object, message: Message) -> None:
        assert error is None, error
        landed.append(position(message))

    for event in events:
        if isinstance(event, Operation):
            key, value = event.operation_id.encode(), encode_operation(event)
        else:
            key, value = b"garbage", event
        producer.produce(settings.topics.operations, key=key, value=value, on_delivery=delivered)
    assert producer.flush(30) == 0
    return landed


def sent_and_folded(settings: Settings, operations: int) -> int:
    """The events of ``operations`` sent, folded by a projector that then stopped; how many."""
    sent = [e for i in range(operations) for e in history(f"op-{i}", PATHS[i % len(PATHS)])]
    send_operations(settings, sent)
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    projector.start()
    try:
        wait_until(
            lambda: summary(status_rows(settings)) == expected_summary(sent),
            timeout_s=90,
            what="every event folded",
        )
    finally:
        stop.set()
        projector.join(timeout=60)
    return len(sent)


def status_rows(settings: Settings) -> list[dict[str, Any]]:
    """Every row of the read table ``operation_status``, by operation id."""
    schema = read_schema(settings.postgres)
    with psycopg.connect(settings.postgres.conninfo(), row_factory=dict_row) as conn:
        return conn.execute(
            f'SELECT * FROM "{schema}".operation_status ORDER BY operation_id'
        ).fetchall()


def positions(settings: Settings) -> dict[tuple[str, int], int]:
    schema = read_schema(settings.postgres)
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        rows = conn.execute(f'SELECT topic, partition, "offset" FROM "{schema}".tracking_positions')
        return {(topic, partition): offset for topic, partition, offset in rows.fetchall()}


def projector_process(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`graph-ingest worker projector`, as a deployment runs it (``env``: its whole environment)."""
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "-v", "worker", "projector"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def expected_summary(events: Sequence[Operation]) -> dict[str, tuple[str, int, int]]:
    """What folding ``events`` must leave: per operation, the newest stage, sequence, attempts."""
    newest: dict[str, Operation] = {}
    for event in events:
        seen = newest.get(event.operation_id)
        if seen is None or event.sequence > seen.sequence:
            newest[event.operation_id] = event
    return {op: (event.stage.value, event.sequence, event.attempts) for op, event in newest.items()}


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[str, int, int]]:
    return {row["operation_id"]: (row["stage"], row["sequence"], row["attempts"]) for row in rows}
