"""SIGKILL a real projector process mid-fold; restarted, it must end with the same read table
as a projector that never crashed (the same events folded in order, without Kafka)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import (
    at_offsets,
    expected_summary,
    fold_in_batches,
    opened_read_tables,
    projector_env,
    projector_process,
    projector_settings,
    send_operations,
    status_rows,
    summary,
)
from tests.operation_histories import histories

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(300)]

OPERATIONS = 600


def test_a_projector_killed_mid_fold_and_restarted_ends_identical(
    pipeline: Pipeline,
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    settings = projector_settings(pipeline)
    env = {
        **os.environ,
        **projector_env(pipeline),
        "GRAPH_INGEST_PROJECTOR__BATCH_MAX_EVENTS": "10",  # many transactions to die between
    }
    log = tmp_path / "projector.log"
    events = histories(OPERATIONS)
    reference = pipeline_factory()
    with opened_read_tables(reference.settings) as tables:
        # Given the events on the topic, and the table a projector that never crashed makes
        send_operations(settings, events)
        fold_in_batches(tables, at_offsets(events), size=50)
        # When a projector is killed while it folds them, and started again
        processes.append(projector_process(env, log))
        wait_until(
            lambda: len(status_rows(settings)) > 0,
            timeout_s=120,
            what="the projector to be folding",
        )
        processes[0].send_signal(signal.SIGKILL)
        processes[0].wait(timeout=30)
        assert len(status_rows(settings)) < OPERATIONS, "killed too late: it had folded all"
        processes.append(projector_process(env, log))
        # Then it ends with the very rows of the reference
        expected = expected_summary(events)
        wait_until(
            lambda: summary(status_rows(settings)) == expected,
            timeout_s=120,
            what="every event folded after the restart",
        )
        assert status_rows(settings) == status_rows(reference.settings)
