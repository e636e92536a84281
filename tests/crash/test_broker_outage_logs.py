"""A broker outage in the logs (issue 19 item 6): librdkafka's lines and the client errors go
through Python logging, de-duplicated, so 30 s without Kafka is a bounded number of records and
not one raw stderr line per retry; ``--log-format json`` stays one JSON object per line; the
passwords set never appear; and the workers carry on once the broker is back."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas.headers import SUBMISSION_ID
from graph_ingest.stack.manager import LocalStack
from graph_ingest.waiting import WaitTimeout, wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.kafka_messages import read_to_end
from tests.processes import dump_stacks, stop_gracefully
from tests.unit.requests import request
from tests.worker_logs import (
    RAW_LIBRDKAFKA,
    SASL_PASSWORD,
    assert_no_secret,
    json_records,
    lines_of,
    start_worker,
)

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(360)]

OUTAGE_S = 30.0
MAX_OUTAGE_RECORDS = 50
"""Per worker, from the broker's stop until a plan sent after its return has completed."""


def test_a_broker_outage_is_a_few_log_records_and_never_a_raw_client_line(
    pipeline: Pipeline,
    local_stack: LocalStack,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # Given two appliers in one group, one logging JSON with a SASL password among its client
    # settings, the other text at the default verbosity, and a planner logging JSON
    json_log, text_log = tmp_path / "applier-json.log", tmp_path / "applier-text.log"
    planner_log = tmp_path / "planner-json.log"
    logs = (json_log, text_log, planner_log)
    sasl = {"sasl.username": "graph", "sasl.password": SASL_PASSWORD}
    processes.append(
        start_worker(
            pipeline,
            "applier",
            "applier-json",
            json_log,
            "--log-format",
            "json",
            env={"GRAPH_INGEST_KAFKA__EXTRA": json.dumps(sasl)},
        )
    )
    processes.append(start_worker(pipeline, "applier", "applier-text", text_log))
    processes.append(
        start_worker(
            pipeline,
            "planner",
            "planner-json",
            planner_log,
            "--log-format",
            "json",
            command=("--planner", "tests.planners:build"),
            env={"PYTHONFAULTHANDLER": "1"},  # SIGABRT: every thread's stack (dump_stacks)
        )
    )
    before = doc_v1(pipeline, "doc-before")
    pipeline.publish(before)
    pipeline.wait_stage(before.operation_id, Stage.COMPLETED, timeout_s=120)
    first_request = plan_request(pipeline, "request-before")
    logged_before = {log: len(lines_of(log)) for log in logs}

    # When the broker is away for 30 s and comes back
    local_stack.stop_service("kafka")
    try:
        time.sleep(OUTAGE_S)  # the outage itself, not a wait for a condition
    finally:
        local_stack.start_service("kafka")

    # Then the workers recover: a plan sent after the outage completes, and a request sent
    # after it is planned, once, as the one before was
    after = doc_v1(pipeline, "doc-after")
    pipeline.publish(after)
    pipeline.wait_stage(after.operation_id, Stage.COMPLETED, timeout_s=180)
    try:
        requested = {first_request, plan_request(pipeline, "request-after")}
    except WaitTimeout:
        raise AssertionError(dump_stacks(processes[2], planner_log)) from None
    plans = read_to_end(pipeline.settings, pipeline.settings.topics.plans)
    planned = Counter(submission for *_, h in plans if (submission := h.get(SUBMISSION_ID)))
    assert planned == dict.fromkeys(requested, 1), planned
    outage_records = {log: len(lines_of(log)) - n for log, n in logged_before.items()}
    stop_gracefully(processes)
    assert [process.returncode for process in processes] == [0, 0, 0]

    # and the outage was logged, through logging, a bounded number of times
    assert all(0 < n < MAX_OUTAGE_RECORDS for n in outage_records.values()), outage_records
    records = json_records(json_log)
    assert any(r["logger"] == "graph_ingest.kafka.client" for r in records), records
    # and no raw librdkafka line reached stderr
    for log in logs:
        raw = [line for line in lines_of(log) if RAW_LIBRDKAFKA.match(line) or line[:1] == "%"]
        assert raw == [], raw
    # and every JSON line names its worker
    assert {r.get("worker_id") for r in records} == {"applier-json"}
    assert {r.get("worker_id") for r in json_records(planner_log)} == {"planner-json"}
    # and each worker said, at the default verbosity, that it started and stopped
    text = text_log.read_text()
    assert "applier worker applier-text started (group " in text
    assert "applier worker applier-text stopped" in text
    messages = [str(r["message"]) for r in records]
    assert any(m.startswith("applier worker applier-json started") for m in messages)
    # and no password appears anywhere
    for log in logs:
        assert_no_secret(log, SASL_PASSWORD)


def plan_request(pipeline: Pipeline, document_id: str) -> bytes:
    """Submit one ingest request, wait until the planner has published its plan, return its
    submission id."""
    plans = pipeline.settings.topics.plans

    def published() -> set[bytes | None]:
        return {h.get(SUBMISSION_ID) for *_, h in read_to_end(pipeline.settings, plans)}

    with IngestProducer(pipeline.settings) as producer:
        submitted = producer.submit(request(document_id, content="Alice met Bob.")).encode()
    wait_until(lambda: submitted in published(), timeout_s=120, what=f"the plan of {document_id}")
    return submitted
