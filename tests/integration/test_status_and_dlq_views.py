"""`graph-ingest status` and the DLQ CLI as an operator reads them, on the real pipeline: a
dead-lettered operation lists each failure with the error id the write side recorded and as many
attempts as its DLQ entry; an operation held through a Neo4j outage (the network cut by a proxy)
shows the wait and how long it took; a planning DLQ entry shows as the request it holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.main import cli
from graph_ingest.domain.degradation import DegradationLevel
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_degradation_event, encode_plan
from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import CountingWriter, Pipeline
from tests.integration.projection_helpers import projector_env
from tests.integration.test_applier import doc_v1
from tests.integration.test_failure_routing import ROUTING, babbage, babbage_times_out
from tests.integration.test_planner_worker import submit, wait_submission
from tests.kafka_messages import read_to_end
from tests.planners import build
from tests.tcp_proxy import TcpProxy
from tests.unit.requests import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def run(pipeline: Pipeline, *args: str) -> Result:
    return CliRunner(env=projector_env(pipeline)).invoke(cli, list(args))


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_dead_lettered_operation_shows_each_failure_as_the_write_side_recorded_it(
    projected: PipelineFactory,
) -> None:
    pipeline = projected(**ROUTING)
    plan = babbage(pipeline)
    pipeline.start_applier(babbage_times_out(pipeline))
    # Given a plan of submission "sub-1" that fails every delivery until it is dead-lettered
    pipeline.publish_raw(
        plan.key.encode(),
        encode_plan(plan),
        headers={
            kafka_headers.OPERATION_ID: plan.operation_id,
            kafka_headers.SUBMISSION_ID: "sub-1",
        },
    )
    pipeline.wait_stage(plan.operation_id, Stage.DEAD_LETTERED, timeout_s=120)
    # When an operator asks for its status (waiting for the projection to catch up)
    shown = as_json(run(pipeline, "status", plan.operation_id, "--wait", "90s", "--json"))
    # Then each failure is on its own step, with the error id of the write side's record of it
    recorded = pipeline.sql(
        "SELECT detail->>'error_id', detail->>'trace_id' FROM failure_attempts"
        " WHERE operation_id = %s ORDER BY attempt",
        plan.operation_id,
    )
    failed = [t["error"] for t in shown["transitions"] if t["error"] is not None]
    assert [(e["error_id"], e["trace_id"]) for e in failed] == [tuple(r) for r in recorded]
    assert [f["detail"]["error_id"] for f in shown["failures"]] == [r[0] for r in recorded]
    assert {e["code"] for e in failed} == {"DEADLINE_EXCEEDED"}
    # and as many attempts as its DLQ entry counts, which it names
    entry = as_json(run(pipeline, "dlq", "show", shown["dlq_id"], "--json"))
    assert shown["attempts"] == entry["attempts"] == len(recorded) >= 2
    assert entry["request"] is None and entry["plan"]["operation_id"] == plan.operation_id
    assert (shown["stage"], shown["plan_kind"], shown["submission_id"]) == (
        "DEAD_LETTERED",
        "INGESTION",
        "sub-1",
    )
    # and the text names each error id on its step
    text = run(pipeline, "status", plan.operation_id)
    assert text.exit_code == 0, text.output
    steps = [line for line in text.output.splitlines() if "DEADLINE_EXCEEDED" in line]
    for error_id, _ in recorded:
        assert any(f"(error {error_id}, trace " in line for line in steps), text.output


def neo4j_open(pipeline: Pipeline) -> bool:
    """Whether a worker of ``pipeline`` has said it is degraded (its Neo4j breaker open)."""
    events = read_to_end(pipeline.settings, pipeline.settings.topics.degradation)
    return any(
        decode_degradation_event(value).level is not DegradationLevel.L0 for _, value, _ in events
    )


def test_an_outage_waited_out_in_place_is_shown_with_its_duration(
    projected: PipelineFactory,
) -> None:
    pipeline = projected(**ROUTING, breaker_failure_threshold=2, breaker_probe_interval_s=0.2)
    neo4j = urlparse(pipeline.settings.neo4j.uri)
    proxy = TcpProxy((neo4j.hostname or "127.0.0.1", neo4j.port or 7687))
    proxy.start()
    proxied = pipeline.settings.neo4j.model_copy(update={"uri": f"bolt://127.0.0.1:{proxy.port}"})
    settings = pipeline.settings.model_copy(update={"neo4j": proxied})
    try:
        pipeline.start_applier(CountingWriter(proxied), settings=settings)
        first, held = doc_v1(pipeline, "doc-1"), doc_v1(pipeline, "doc-held")
        pipeline.publish(first)
        pipeline.wait_stage(first.operation_id, Stage.COMPLETED, timeout_s=120)
        # Given the applier's Neo4j unreachable while a plan arrives, until its breaker opens
        proxy.cut()
        pipeline.publish(held)
        wait_until(lambda: neo4j_open(pipeline), timeout_s=120, what="the Neo4j breaker open")
        # When Neo4j answers again
        restored = datetime.now(UTC)
        proxy.start()
        pipeline.wait_stage(held.operation_id, Stage.COMPLETED, timeout_s=120)
    finally:
        proxy.cut()
    # Then its status shows the outage it was held through, and for how long, no attempt spent
    shown = as_json(run(pipeline, "status", held.operation_id, "--wait", "90s", "--json"))
    assert (shown["stage"], shown["attempts"]) == ("COMPLETED", 0)
    [wait] = shown["waits"]
    started, ended = (datetime.fromisoformat(wait[k]) for k in ("started_at", "ended_at"))
    assert wait["dependency"] == "neo4j" and started <= restored <= ended
    assert wait["seconds"] == pytest.approx((ended - started).total_seconds(), abs=0.01)
    text = run(pipeline, "status", held.operation_id)
    assert text.exit_code == 0, text.output
    assert f"waited out  neo4j outage from {started.isoformat()}" in text.output


def test_a_planning_dlq_entry_is_shown_as_the_request_it_holds(pipeline: Pipeline) -> None:
    pipeline.start_planner(build(pipeline.settings))
    # Given a request the planner refuses for good
    (refused,) = submit(pipeline, request("doc-bad", content="PERMANENT"))
    dlq_id = wait_submission(pipeline, refused).dlq_id
    assert dlq_id is not None
    # Then the DLQ lists and shows it as that request, not as a plan that does not decode
    [listed] = as_json(run(pipeline, "dlq", "list", "--json"))["entries"]
    assert listed["request"]["submission_id"] == refused
    table = run(pipeline, "dlq", "list")
    assert f"unit/doc-bad  request {refused}" in table.output, table.output
    shown = as_json(run(pipeline, "dlq", "show", dlq_id, "--json"))
    assert shown["plan"] is None
    assert (shown["request"]["space"], shown["request"]["document_id"]) == ("unit", "doc-bad")
    assert (shown["error_class"], shown["operation_id"]) == ("PlanningError", None)
    text = run(pipeline, "dlq", "show", dlq_id).output
    assert f"request       submission {refused}: INGEST unit/doc-bad version" in text, text
    assert "plan          none" not in text and "DecodeError" not in text
    # and its replay says it submits the request again
    replayed = run(pipeline, "dlq", "replay", dlq_id, "--reason", "planner fixed")
    assert replayed.exit_code == 0, replayed.output
    assert f"(submission {refused}, unit/doc-bad): request re-submitted to" in replayed.output
