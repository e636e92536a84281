"""What a worker's stderr holds (issue 19 item 6): at the default verbosity it says that it
started (kind, worker id, group, the collector threshold it set: issue 20) and stopped; at any
verbosity no password set in its settings appears, in text or JSON; every JSON line parses and
names the worker."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from graph_ingest.domain.stages import Stage
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.processes import stop_gracefully
from tests.worker_logs import assert_no_secret, json_records, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize("verbosity", [[], ["-vv"]], ids=["default", "debug"])
def test_a_worker_says_it_started_and_stopped_and_never_shows_a_password(
    pipeline: Pipeline, tmp_path: Path, log_format: str, verbosity: list[str]
) -> None:
    # Given an applier with passwords set
    log = tmp_path / "applier.log"
    applier = start_worker(
        pipeline,
        "applier",
        "applier-logs",
        log,
        *verbosity,
        "--log-format",
        log_format,
        env={"GRAPH_INGEST_GC__YOUNG_THRESHOLD": "20000"},
    )
    processes: list[subprocess.Popen[bytes]] = [applier]
    try:
        # When it applies a plan and is asked to stop
        plan = doc_v1(pipeline, "doc-logged")
        pipeline.publish(plan)
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=90)
    finally:
        stop_gracefully(processes)
    assert applier.returncode == 0, log.read_text()[-3000:]
    # Then it said so, and no password is in what it wrote
    group = pipeline.settings.applier.group_id
    if log_format == "json":
        records = json_records(log)
        assert {r.get("worker_id") for r in records} == {"applier-logs"}
        messages = [str(r["message"]) for r in records]
    else:
        messages = log.read_text().splitlines()
    started = f"applier worker applier-logs started (group {group}, gc young threshold 20000)"
    assert any(started in m for m in messages)
    assert any("applier worker applier-logs stopped" in m for m in messages)
    # (with its member id, each assignment change: kafka/membership.py)
    assert any(f"group {group} (" in m and " member " in m and ": assigned " in m for m in messages)
    assert_no_secret(log)
