"""Operation events v2 on the real pipeline: what the read table knows of a dead-lettered and a
parked operation (plan kind, submission, error id and trace id, retry tier, parked-behind, each
failure on its own step, attempts as its DLQ entry counts them), folded by a real projector from
a real applier's relay; and `errors report` over it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.projection_helpers import projector_env, projector_settings, status_rows
from tests.integration.test_applier import doc_v1
from tests.integration.test_failure_routing import ROUTING, babbage_times_out, three_versions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def read_row(settings: Settings, operation_id: str, stage: Stage) -> dict[str, Any]:
    """The read table's row of ``operation_id`` once the projector has folded it at ``stage``."""

    def folded() -> dict[str, Any] | None:
        rows = [r for r in status_rows(settings) if r["operation_id"] == operation_id]
        return rows[0] if rows and rows[0]["stage"] == stage.value else None

    return wait_until(folded, timeout_s=90, what=f"{operation_id} folded at {stage}")


def test_the_read_table_knows_a_dead_lettered_and_a_parked_operation(
    projected: Callable[..., Pipeline],
) -> None:
    pipeline = projected(**ROUTING)
    settings = projector_settings(pipeline)
    v1, v2, v3 = three_versions(pipeline)
    pipeline.start_applier(babbage_times_out(pipeline))
    # Given v1 submitted as submission "sub-v1", failing every delivery
    pipeline.publish_raw(
        f"{v1.space}/{v1.document_id}".encode(),
        encode_plan(v1),
        headers={
            kafka_headers.OPERATION_ID: v1.operation_id,
            kafka_headers.SUBMISSION_ID: "sub-v1",
        },
    )
    failed = pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    # (the write side names the tier its next retry runs on)
    assert failed.retry_tier == 0 and failed.next_retry_at is not None
    # When v2 and v3 arrive behind it, and v1 runs out of retries
    pipeline.publish(v2, v3)
    pipeline.wait_stage(v1.operation_id, Stage.DEAD_LETTERED, timeout_s=120)
    # Then v3, parked (behind v2) and then dead-lettered behind v1, names the leader it waits
    # for as its DLQ entry does (its row read once it rests: a PARKED row may be folded over
    # before the test looks)
    parked = read_row(settings, v3.operation_id, Stage.DEAD_LETTERED)
    entries = {e.operation_id: e for e in pipeline.dlq_entries(3)}
    assert parked["parked_behind"] == entries[v3.operation_id].parked_behind == v1.operation_id
    assert parked["plan_kind"] == "INGESTION"
    assert "PARKED" in [t["stage"] for t in parked["transitions"]]
    # and `status` names the chain of leaders it waits behind (v1 waits behind none)
    runner = CliRunner(env=projector_env(pipeline))
    shown = runner.invoke(cli, ["status", v3.operation_id, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["parked_chain"] == [v1.operation_id]
    # and the dead-lettered one has every column an operator asks for
    dead = read_row(settings, v1.operation_id, Stage.DEAD_LETTERED)
    entry = entries[v1.operation_id]
    recorded = pipeline.sql(
        "SELECT detail->>'error_id', detail->>'trace_id' FROM failure_attempts"
        " WHERE operation_id = %s ORDER BY attempt",
        v1.operation_id,
    )
    assert (dead["plan_kind"], dead["submission_id"], dead["dlq_id"]) == (
        "INGESTION",
        "sub-v1",
        entry.dlq_id,
    )
    assert (dead["error_id"], dead["trace_id"]) == tuple(recorded[-1])
    assert (dead["error_code"], dead["retry_tier"]) == ("DEADLINE_EXCEEDED", None)
    # and as many attempts as its DLQ entry counts (moving to the DLQ is a failed attempt too)
    assert dead["attempts"] == entry.attempts == len(recorded) >= 2
    # with each failure on the step that recorded it, each its own error id
    failures = [t for t in dead["transitions"] if t["stage"] in ("FAILED", "DEAD_LETTERED")]
    assert all(t["error"] is not None for t in failures)
    assert [t["error"]["error_id"] for t in failures] == [error_id for error_id, _ in recorded]
    others = [t for t in dead["transitions"] if t not in failures]
    assert all(t["error"] is None for t in others), dead["transitions"]
    # and the errors report counts v1's failures as the write side recorded them
    since = (failed.created_at - timedelta(minutes=1)).isoformat()
    until = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    result = runner.invoke(cli, ["errors", "report", "--from", since, "--to", until, "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    [timeouts] = [g for g in found["groups"] if g["code"] == "DEADLINE_EXCEEDED"]
    assert (timeouts["failures"], timeouts["operations"]) == (len(recorded), 1)
    assert timeouts["example_operation_ids"] == [v1.operation_id]
    assert since <= timeouts["first_seen"] <= timeouts["last_seen"] <= until
    assert found["failures"] == sum(g["failures"] for g in found["groups"])
    # as CSV too, one line per group
    result = runner.invoke(
        cli, ["errors", "report", "--from", since, "--to", until, "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 1 + len(found["groups"])
    # and nothing before it all
    result = runner.invoke(
        cli, ["errors", "report", "--from", "2020-01-01T00:00:00Z", "--to", since, "--json"]
    )
    assert (result.exit_code, json.loads(result.output)["groups"]) == (0, [])


def test_an_outage_waited_out_in_place_leaves_its_trace(
    projected: Callable[..., Pipeline],
) -> None:
    pipeline = projected(**ROUTING, breaker_failure_threshold=2, breaker_probe_interval_s=0.2)
    settings = projector_settings(pipeline)
    plan = doc_v1(pipeline, "doc-held")
    # Given Neo4j unavailable (its probe fails too) while a plan arrives
    writer = FailingWriter(pipeline.settings, StatusCode.UNAVAILABLE)
    writer.sick.set()
    pipeline.publish(plan)
    pipeline.start_applier(writer)
    # When the applier has waited behind the open breaker for a while, and Neo4j comes back
    wait_until(lambda: writer.failures >= 6, timeout_s=60, what="6 failed writes or probes")
    writer.sick.clear()
    # Then the plan completes without a failed attempt, and the wait is on its operation
    done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert done.attempts == 0
    [wait] = done.waits
    assert wait.dependency == "neo4j" and wait.started_at < wait.ended_at <= done.updated_at
    # and in the read table
    row = read_row(settings, plan.operation_id, Stage.COMPLETED)
    assert [w["dependency"] for w in row["waits"]] == ["neo4j"]
