"""SIGTERM: the applier finishes what it holds, commits its offsets and leaves, exit code 0."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.stack.process import start_bound
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.kafka_messages import group_offsets

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def test_sigterm_commits_offsets_and_exits_cleanly(pipeline: Pipeline, tmp_path: Path) -> None:
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(20)]
    pipeline.publish(*plans)
    log = tmp_path / "applier.log"
    applier = start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "worker", "applier"],
        cwd=REPO,
        env={**os.environ, **pipeline.env()},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        for plan in plans:
            pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=90)
        # When it is asked to stop
        applier.send_signal(signal.SIGTERM)
        # Then it exits by itself, successfully
        assert applier.wait(timeout=60) == 0, log.read_text()
    finally:
        if applier.poll() is None:
            applier.kill()
            applier.wait()
    # and its group's committed offsets cover every plan: nothing would be redelivered
    topics = pipeline.settings.topics
    committed, ends = group_offsets(pipeline.settings, topics.plans, topics.plan_partitions)
    assert sum(ends.values()) == len(plans)
    assert {p: o for p, o in committed.items() if ends[p]} == {p: e for p, e in ends.items() if e}
