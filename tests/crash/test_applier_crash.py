"""SIGKILL a real applier process inside the two dangerous windows; a restart must finish the job."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1, planned_elements

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]


def start(env: dict[str, str], marker: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "tests.crash.applier_process", str(marker), mode],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


@pytest.mark.parametrize("window", ["after-graph-write", "before-state-commit"])
def test_a_killed_applier_is_finished_by_its_successor(
    window: str,
    pipeline: Pipeline,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    env = {**os.environ, **pipeline.env()}
    plan = doc_v1(pipeline)
    pipeline.publish(plan)
    marker = tmp_path / "halted"
    log = tmp_path / "applier.log"
    # Given an applier that halts inside the window
    doomed = start(env, marker, window, log)
    processes.append(doomed)
    wait_until(lambda: marker.exists() or doomed.poll() is not None, timeout_s=90, what="the halt")
    assert marker.exists(), log.read_text()
    expected_stage = Stage.PREPARED if window == "after-graph-write" else Stage.GRAPH_APPLIED
    assert pipeline.store.get_operation(plan.operation_id).stage is expected_stage  # type: ignore[union-attr]
    # When it is SIGKILLed there
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=30)
    # and a normal applier takes over
    processes.append(start(env, tmp_path / "unused", "none", log))
    # Then the operation completes with exactly the planned graph at revision 1
    operation = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=120)
    assert pipeline.graph_elements() == planned_elements(plan)
    state = pipeline.store.get_document_state("it", "doc-1")
    assert state is not None
    assert (state.revision, state.operation_id) == (1, plan.operation_id)
    assert [h.revision for h in pipeline.store.document_history("it", "doc-1")] == [1]
    assert operation.stage_times.keys() >= {Stage.PREPARED, Stage.GRAPH_APPLIED, Stage.COMPLETED}
