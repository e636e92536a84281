"""The DLQ entries, documents and worker degradation read tables beside a real applier: after a
plan dead-lettered and replayed and another left in the DLQ, the read DLQ table agrees with the
write side's DLQ index and `doc show` with the write side's document state; a worker's
degradation events make its row; a message that is none on the DLQ and degradation topics is
skipped, its position recorded."""

from __future__ import annotations

import functools
import json
import threading

import pytest
from click.testing import CliRunner
from confluent_kafka import Message, Producer

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.projections.degradation_rows import worker_degradations
from graph_ingest.projections.dlq_entries import DlqEntryQueries
from graph_ingest.projections.tables import ReadTables, read_schema
from graph_ingest.settings import Settings
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.projection_helpers import (
    opened_read_tables,
    projector_env,
    projector_settings,
)
from tests.integration.test_dlq_cli import SPACE, dangling, dead_lettered, dlq, ghosts
from tests.kafka_messages import position
from tests.read_view_samples import degradation_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

Summary = dict[str, tuple[object, ...]]


def write_side_dlq(pipeline: Pipeline) -> Summary:
    return {
        e.dlq_id: (e.status, e.attempts, e.code, e.operation_id, e.space, e.document_id, e.envelope)
        for e in pipeline.store.list_dlq_entries(DlqQuery())
    }


def shown_as_stored(pipeline: Pipeline, document: str) -> bool:
    """`doc show` says what the write side's document state says."""
    return doc_show(pipeline, document) == write_state(pipeline, document)


def read_side_dlq(tables: ReadTables) -> Summary:
    entries = DlqEntryQueries(tables).list_entries(limit=100).entries
    return {
        e.dlq_id: (e.status, e.attempts, e.code, e.operation_id, e.space, e.document_id, e.envelope)
        for e in entries
    }


def send_poison(settings: Settings) -> list[tuple[str, int, int]]:
    """A message that is none on the DLQ topic and on the degradation topic; where they landed
    (topic, partition, offset)."""
    producer = Producer(settings.kafka.producer_config())
    landed: list[tuple[str, int, int]] = []

    def delivered(error: object, message: Message) -> None:
        assert error is None, error
        landed.append(position(message))

    producer.produce(
        settings.topics.dlq, b"\x00 no envelope", b"dlq-garbage", on_delivery=delivered
    )
    producer.produce(settings.topics.degradation, b"\x00 no event", b"w", on_delivery=delivered)
    assert producer.flush(30) == 0
    return landed


def folded_past(pipeline: Pipeline, settings: Settings, landed: list[tuple[str, int, int]]) -> bool:
    """Whether the DLQ and degradation projections have recorded the positions ``landed``."""
    schema = read_schema(settings.postgres)
    rows = pipeline.sql(
        f'SELECT topic, partition, "offset" FROM "{schema}".tracking_positions '
        "WHERE projection IN ('dlq_entries', 'worker_degradation')"
    )
    recorded = {(topic, partition): offset for topic, partition, offset in rows}
    return all(recorded.get((t, p), -1) >= offset for t, p, offset in landed)


def test_the_read_views_agree_with_the_write_side_of_a_real_applier(pipeline: Pipeline) -> None:
    # Given an applier and a projector
    settings = projector_settings(pipeline)
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    pipeline.start_applier()
    projector.start()
    try:
        # When two plans are dead-lettered, one replayed once its node exists, and a worker's
        # breakers open among messages that are none
        first, second = dangling(pipeline, 1), dangling(pipeline, 2)
        entries = dead_lettered(pipeline, first, second)
        ghosts(pipeline, 1)
        assert dlq(pipeline, "replay", entries[first.operation_id].dlq_id).exit_code == 0
        pipeline.wait_stage(first.operation_id, Stage.COMPLETED)
        with DegradationPublisher(settings) as publisher:
            for event in degradation_events("applier-x"):
                publisher.publish(event)
        poison = send_poison(settings)
        # Then the read DLQ table agrees with the write side's DLQ index: one REPLAYED
        with opened_read_tables(settings) as tables:
            wait_until(
                lambda: read_side_dlq(tables) == write_side_dlq(pipeline),
                timeout_s=90,
                what="the read DLQ entries to agree with the DLQ index",
            )
            statuses = {status for status, *_ in read_side_dlq(tables).values()}
            assert statuses == {DlqStatus.REPLAYED, DlqStatus.PENDING_REVIEW}
            # and the worker's newest degradation has its row
            [worker] = wait_until(
                lambda: worker_degradations(tables) or None, timeout_s=60, what="degradation"
            )
            assert (worker.worker_id, worker.level.value) == ("applier-x", "L1")
            assert worker.breakers == {"neo4j": "half-open"}
        # and `doc show` says what the write side's document state says
        for document in ("doc-1", "doc-ghosts"):
            assert wait_until(
                functools.partial(shown_as_stored, pipeline, document),
                timeout_s=60,
                what=f"doc show {document} to agree with the document state",
            )
        # and the poison was skipped, its position recorded, the projector still running
        wait_until(lambda: folded_past(pipeline, settings, poison), timeout_s=60, what="poison")
        assert projector.is_alive()
    finally:
        stop.set()
        projector.join(timeout=60)
    assert not projector.is_alive()
    # and as text, the document's revision and its operation's way through the DLQ
    runner = CliRunner(env=projector_env(pipeline))
    text = runner.invoke(cli, ["doc", "show", SPACE, "doc-1"])
    assert text.exit_code == 0, text.output
    assert f"revision   1 (operation {first.operation_id}, completed " in text.stdout
    assert f"  {first.operation_id}  base revision 0  COMPLETED " in text.stdout
    # and an unknown document exits with the not-found code, under --json as a JSON error
    unknown = runner.invoke(cli, ["doc", "show", SPACE, "nope"])
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "document it/nope not found" in unknown.stderr
    as_json = runner.invoke(cli, ["doc", "show", SPACE, "nope", "--json"])
    assert as_json.exit_code == ExitCode.NOT_FOUND
    assert json.loads(as_json.stdout)["error"]["code"] == "NOT_FOUND"


def doc_show(pipeline: Pipeline, document: str) -> tuple[int, str | None] | None:
    runner = CliRunner(env=projector_env(pipeline))
    result = runner.invoke(cli, ["doc", "show", SPACE, document, "--json"])
    if result.exit_code != 0:
        return None
    view = json.loads(result.stdout)
    return view["revision"], view["operation_id"]


def write_state(pipeline: Pipeline, document: str) -> tuple[int, str]:
    [(revision, operation_id)] = pipeline.sql(
        "SELECT revision, operation_id FROM document_states WHERE space = %s AND document_id = %s",
        SPACE,
        document,
    )
    return revision, operation_id


def test_a_worker_whose_neo4j_breaker_opens_gets_its_degradation_row(pipeline: Pipeline) -> None:
    # Given an applier whose Neo4j is unavailable (its probe too), and a projector
    settings = projector_settings(pipeline)
    writer = FailingWriter(pipeline.settings, StatusCode.UNAVAILABLE)
    writer.sick.set()
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    projector.start()
    try:
        # When a plan arrives: its writes fail until the Neo4j breaker opens
        pipeline.publish(dangling(pipeline, 1))
        pipeline.start_applier(writer)
        # Then the worker's row says it is degraded, and by which breaker
        with opened_read_tables(settings) as tables:
            [worker] = wait_until(
                lambda: [w for w in worker_degradations(tables) if w.level.value != "L0"] or None,
                timeout_s=90,
                what="the applier's degradation row",
            )
        assert worker.worker_id.startswith(pipeline.settings.applier.worker_id)
        assert worker.level.value == "L1" and worker.breakers == {"neo4j": "open"}
        assert worker.previous_level.value == "L0"
    finally:
        writer.sick.clear()
        stop.set()
        projector.join(timeout=60)
