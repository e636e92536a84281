"""Two planner worker processes in one group while requests flow, one leaving and joining again:
every request is planned exactly once (read_committed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.processes import stop_gracefully
from tests.unit.requests import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]


def planner(env: dict[str, str], worker_id: str, log: Path) -> subprocess.Popen[bytes]:
    """`graph-ingest worker planner` with the test planner, as a deployment runs it."""
    return start_bound(
        [
            sys.executable,
            "-m",
            "graph_ingest.cli.main",
            "-v",
            "worker",
            "planner",
            "--planner",
            "tests.planners:build",
        ],
        cwd=REPO,
        env={**env, "GRAPH_INGEST_PLANNER__WORKER_ID": worker_id},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def sharing(pipeline: Pipeline, count: int) -> bool:
    """Whether the planner group has ``count`` members, each owning partitions."""
    admin = AdminClient(pipeline.settings.kafka.common_config())
    group = pipeline.settings.planner.group_id
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    owned = [len(m.assignment.topic_partitions) for m in description.members]
    return len(owned) == count and all(owned)


def test_every_request_is_planned_exactly_once_while_planners_leave_and_join(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    env = {**os.environ, **pipeline.env()}
    log = tmp_path / "planners.log"
    started: list[subprocess.Popen[bytes]] = []
    submitted: list[str] = []
    try:
        with IngestProducer(pipeline.settings) as producer:

            def submit(first: int, count: int) -> None:
                submitted.extend(
                    s.submission_id
                    for s in producer.submit_many(
                        [
                            request(f"doc-{i}", content=f"Alice met Bob{i}.")
                            for i in range(first, first + count)
                        ]
                    )
                )

            def planned() -> int:
                return len(read_to_end(pipeline.settings, pipeline.settings.topics.plans))

            # Given one planner at work
            started.append(planner(env, "planner-a", log))
            submit(0, 40)
            wait_until(lambda: planned() >= 10, timeout_s=90, what="the first plans")
            # When a second joins while requests flow
            started.append(planner(env, "planner-b", log))
            wait_until(lambda: sharing(pipeline, 2), timeout_s=90, what="planner-b to join")
            for first in range(40, 80, 10):
                submit(first, 10)
            # and the first leaves (SIGTERM) while more arrive, then joins again
            started[0].send_signal(signal.SIGTERM)
            assert started[0].wait(timeout=60) == 0, log.read_text()
            submit(80, 40)
            wait_until(lambda: sharing(pipeline, 1), timeout_s=90, what="planner-a to leave")
            started.append(planner(env, "planner-a", log))
            wait_until(lambda: sharing(pipeline, 2), timeout_s=90, what="planner-a to rejoin")
            for first in range(120, 160, 10):
                submit(first, 10)
            # Then every request has exactly one committed plan
            wait_until(lambda: planned() >= 160, timeout_s=120, what="every plan")
    finally:
        stop_gracefully(started)

    plans = read_to_end(pipeline.settings, pipeline.settings.topics.plans)
    per_submission = Counter(h[kafka_headers.SUBMISSION_ID].decode() for _, _, h in plans)
    assert set(per_submission) == set(submitted)
    assert [s for s, n in per_submission.items() if n != 1] == []
    assert len(plans) == 160
