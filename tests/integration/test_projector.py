"""The projector worker on real Kafka and PostgreSQL: beside a real applier its read table agrees
with the write side's operations; a message that is no operation event is skipped, its position
recorded; two `graph-ingest worker projector` processes share the group while events flow and
one leaves: nothing is missed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from graph_ingest.cli.main import cli
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.tables import read_schema
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.projection_helpers import (
    BABBAGE,
    alice_plans,
    expected_summary,
    positions,
    projector_env,
    projector_process,
    projector_settings,
    send_operations,
    sent_and_folded,
    status_rows,
    summary,
)
from tests.operation_histories import COMPLETED, PATHS, history
from tests.processes import stop_gracefully

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def write_side(pipeline: Pipeline) -> dict[str, tuple[str, int, int]]:
    rows = pipeline.sql("SELECT operation_id, stage, sequence, attempts FROM operations")
    return {op: (stage, sequence, attempts) for op, stage, sequence, attempts in rows}


def test_the_read_table_agrees_with_the_write_side_of_a_real_applier(pipeline: Pipeline) -> None:
    # Given an applier (with its relay) whose writes of Babbage always time out, and a projector
    settings = projector_settings(pipeline)
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    culprit = BABBAGE.node_id("it")
    pipeline.start_applier(
        FailingWriter(pipeline.settings, StatusCode.DEADLINE_EXCEEDED, [culprit])
    )
    projector.start()
    try:
        plans = alice_plans(pipeline, 6)
        # When plans are applied or dead-lettered, and a message that is no operation event
        # arrives among their events
        pipeline.publish(*plans[:3])
        [(topic, partition, offset)] = send_operations(settings, [b"\x00 no operation event"])
        pipeline.publish(*plans[3:])
        pipeline.wait_stage(plans[0].operation_id, Stage.DEAD_LETTERED, timeout_s=120)
        for plan in plans[1:]:
            pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
        # Then the read table agrees with the write side for every operation
        wait_until(
            lambda: summary(status_rows(settings)) == write_side(pipeline),
            timeout_s=90,
            what="the read table to agree with the operations table",
        )
        # with the dead-lettered one's every step, its retries included
        dead = next(r for r in status_rows(settings) if r["operation_id"] == plans[0].operation_id)
        assert [t["sequence"] for t in dead["transitions"]] == list(range(1, dead["sequence"] + 1))
        assert {"FAILED", "PREPARED", "DEAD_LETTERED"} <= {t["stage"] for t in dead["transitions"]}
        # and the event that was none was skipped, its position recorded with the others
        wait_until(
            lambda: positions(settings).get((topic, partition), -1) >= offset,
            timeout_s=60,
            what="the skipped event's position",
        )
        assert projector.is_alive()  # skipped, not stopped on
    finally:
        stop.set()
        projector.join(timeout=60)
    assert not projector.is_alive()


def sharing(settings: Settings, count: int) -> bool:
    """Whether the projector group has ``count`` members, each owning partitions."""
    admin = AdminClient(settings.kafka.common_config())
    group = settings.projector.group_id
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    owned = [len(m.assignment.topic_partitions) for m in description.members]
    return len(owned) == count and all(owned)


def test_two_projector_processes_share_the_group_and_one_leaves_nothing_missed(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    settings = projector_settings(pipeline)
    env = {**os.environ, **projector_env(pipeline)}
    log = tmp_path / "projectors.log"
    sent: list[Operation] = []
    started: list[subprocess.Popen[bytes]] = []

    def send(first: int, count: int) -> None:
        events = [
            e
            for i in range(first, first + count)
            for e in history(f"op-{i:03d}", PATHS[i % len(PATHS)], document=f"doc-{i}")
        ]
        send_operations(settings, events)
        sent.extend(events)

    def folded() -> bool:
        return summary(status_rows(settings)) == expected_summary(sent)

    try:
        # Given one projector at work
        started.append(projector_process(env, log))
        send(0, 30)
        wait_until(lambda: len(status_rows(settings)) >= 10, timeout_s=90, what="first folds")
        # When a second joins while events flow
        started.append(projector_process(env, log))
        wait_until(lambda: sharing(settings, 2), timeout_s=90, what="the second to join")
        for first in range(30, 70, 10):
            send(first, 10)
        # and the first leaves (SIGTERM) while more arrive
        started[0].send_signal(signal.SIGTERM)
        assert started[0].wait(timeout=60) == 0, log.read_text()
        send(70, 30)
        wait_until(lambda: sharing(settings, 1), timeout_s=90, what="the first to leave")
        send(100, 20)
        # Then every operation is folded, newest snapshot and whole history
        wait_until(folded, timeout_s=120, what="every event folded")
    finally:
        stop_gracefully(started)
    rows = status_rows(settings)
    assert len(rows) == 120
    for row in rows:
        assert [t["sequence"] for t in row["transitions"]] == list(range(1, row["sequence"] + 1))


def test_the_read_tables_say_where_to_start_not_the_group(pipeline: Pipeline) -> None:
    # Given a projector that folded every event and committed its offsets, then stopped
    settings = projector_settings(pipeline)
    events = [e for i in range(10) for e in history(f"op-{i}", PATHS[i % len(PATHS)])]
    send_operations(settings, events)
    expected = expected_summary(events)

    def run_until_folded() -> None:
        stop = threading.Event()
        projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
        projector.start()
        try:
            wait_until(
                lambda: summary(status_rows(settings)) == expected,
                timeout_s=90,
                what="every event folded",
            )
        finally:
            stop.set()
            projector.join(timeout=60)

    run_until_folded()
    # When its read tables are emptied (as for a rebuild), and it starts again in the same group
    schema = read_schema(settings.postgres)
    pipeline.execute(f'TRUNCATE "{schema}".operation_status, "{schema}".tracking_positions')
    assert status_rows(settings) == []
    # Then it folds the topic again from the start, whatever offsets the group committed
    run_until_folded()


def test_projections_status_shows_idle_then_stalled_in_three_units(pipeline: Pipeline) -> None:
    settings = projector_settings(pipeline)
    runner = CliRunner(
        env={**projector_env(pipeline), "GRAPH_INGEST_PROJECTOR__STALLED_AFTER_S": "0.5"}
    )

    def lag() -> dict[str, Any]:
        result = runner.invoke(cli, ["projections", "status", "--json"])
        assert result.exit_code == 0, result.output
        [projection] = json.loads(result.output)
        return dict(projection)

    # Given a projector that folded every event, then stopped
    sent_and_folded(settings, 6)
    # Then it is idle, nothing behind, its last event as old as the last message
    idle = lag()
    assert (idle["state"], idle["offsets_behind"], idle["seconds_behind"]) == ("idle", 0, 0.0)
    assert idle["last_event_age_s"] is not None and idle["last_event_age_s"] >= 0
    # When five more events arrive and nothing folds them
    send_operations(settings, history("op-late", (Stage.FAILED, Stage.PREPARED, *COMPLETED))[:5])
    # Then it is 5 offsets behind, stalled once its position has not moved for 0.5 s
    stalled = wait_until(
        lambda: (found := lag())["state"] == "stalled" and found,
        timeout_s=30,
        what="the projection to be reported stalled",
    )
    assert stalled["offsets_behind"] == 5
    assert stalled["seconds_behind"] > 0
