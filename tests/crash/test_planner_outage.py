"""A PostgreSQL outage while a replan is pending (issue 16 item 3): the planner process waits it
out, holding the replan's partition, and plans the replan once PostgreSQL is back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.submissions import ReplanOutcome
from graph_ingest.waiting import wait_until
from tests.crash.test_planner_crash import start
from tests.integration.pipeline import Pipeline
from tests.integration.test_planner_worker import produce_requests, wait_submission

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(300)]


def test_a_postgresql_outage_during_a_replan_is_waited_out_and_the_replan_completes(
    pipeline: Pipeline,
    local_stack: LocalStack,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    env = {**os.environ, **pipeline.env(), "GRAPH_INGEST_PLANNER__WORKER_ID": "outage-planner"}
    marker = tmp_path / "met-the-outage"
    log = tmp_path / "planner.log"
    planner = start(env, marker, "store-outage", log)
    processes.append(planner)
    # Given a request planned by the planner process
    (submission_id,) = produce_requests(pipeline, {"doc-1": {}}).values()
    conflicted = wait_submission(pipeline, submission_id, timeout_s=90).operation_id
    assert conflicted is not None

    # When PostgreSQL is down as the request comes back for a replan (as the conflict watcher
    # re-submits it) and the planner has met the outage
    local_stack.stop_service("postgres", hard=True)
    try:
        replan = {kafka_headers.REPLAN_OF: conflicted.encode(), kafka_headers.REPLAN_ATTEMPT: b"1"}
        produce_requests(pipeline, {"doc-1": replan})
        wait_until(
            lambda: marker.exists() or planner.poll() is not None,
            timeout_s=120,
            what="the planner to meet the outage",
        )
    finally:
        local_stack.start_service("postgres")

    # Then the planner process is still running, and plans the replan on PostgreSQL's return
    def replan_outcome() -> list[tuple[str, str]]:
        return pipeline.sql(
            "SELECT outcome, submission_id FROM ingest_replans WHERE operation_id = %s", conflicted
        )

    wait_until(
        lambda: replan_outcome() or planner.poll() is not None, timeout_s=120, what="the replan"
    )
    assert planner.poll() is None, log.read_text()[-3000:]
    assert replan_outcome() == [(ReplanOutcome.REPLANNED.value, submission_id)]
