"""Read your writes on the real pipeline: `submit --wait` returns only once the read tables show
what the write side finished with, so `status` right after never shows an older stage, even from
a projector that lags (a long batch linger); `status --wait` waits for a projector that starts
late, and without one says the operation is not folded yet (exit 4), never "not found"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.planners import build

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan.json"

LAGGING_LINGER_S = 2.0
"""The projector waits this long for more events before folding a batch: it is always behind
the write side for a moment after the last event."""


def submit_and_wait(runner: CliRunner, path: Path, version: str) -> list[dict[str, Any]]:
    result = runner.invoke(
        cli,
        [
            "submit",
            "--space",
            "kb",
            "--version",
            version,
            "--wait",
            "--timeout",
            "2m",
            "--json",
            str(path),
        ],
    )
    assert result.exit_code == 0, result.output
    reported: list[dict[str, Any]] = json.loads(result.stdout)
    return reported


def status_at_once(runner: CliRunner, submission_id: str) -> dict[str, Any]:
    shown = runner.invoke(cli, ["status", submission_id, "--json"])
    assert shown.exit_code == 0, shown.output
    document: dict[str, Any] = json.loads(shown.output)
    return document


def test_status_right_after_submit_wait_never_shows_an_older_stage(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    # Given a planner, an applier and a projector that lags behind them
    lagging = projector_settings(pipeline)
    lagging = lagging.model_copy(
        update={
            "projector": lagging.projector.model_copy(update={"batch_linger_s": LAGGING_LINGER_S})
        }
    )
    pipeline.start_planner(build(pipeline.settings))
    pipeline.start_applier()
    pipeline.start_projector(lagging)
    runner = CliRunner(
        env={**pipeline.env(), "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA": str(BUNDLED_GRAPH_SCHEMA)}
    )
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Alice works with Bob.")
    (corpus / "b.txt").write_text("Carol knows Dave.")
    for version in ("first", "second"):
        if version == "second":
            (corpus / "a.txt").write_text("Alice works with Erin.")
            # b.txt is sent again unchanged as a new version: a new submission (a NO_OP). The
            # very same request again would share the first one's submission id, and `submit
            # --wait` could report that one's outcome while the planner plans it again.
        # When documents are submitted with --wait
        reported = submit_and_wait(runner, corpus, version)
        assert all(r["completed"] and r["projected"] for r in reported), reported
        # Then status, asked at once and without --wait, shows the stage --wait ended with
        for submitted in reported:
            shown = status_at_once(runner, submitted["submission_id"])
            last = shown["path"][-1]
            assert (last["operation_id"], last["stage"]) == (submitted["operation_id"], "COMPLETED")
            assert last["current"] is True
            assert [t["stage"] for t in last["transitions"]][-1] == "COMPLETED"


def test_status_wait_waits_for_a_projector_that_starts_late(pipeline: Pipeline) -> None:
    # Given an operation the applier completed, and no projector yet
    runner = CliRunner(env=pipeline.env())
    pipeline.start_applier()
    published = runner.invoke(cli, ["publish-plan", str(EXAMPLE)])
    assert published.exit_code == 0, published.output
    operation_id = re.search(r"published (op_\w+)", published.output).group(1)  # type: ignore[union-attr]
    committed = pipeline.wait_stage(operation_id, Stage.COMPLETED)
    # Then status says it is committed but not folded yet: exit 4, and where to look
    for wait in ([], ["--wait", "1s"]):
        unfolded = runner.invoke(cli, ["status", operation_id, *wait, "--json"])
        assert unfolded.exit_code == ExitCode.UNAVAILABLE, unfolded.output
        error = json.loads(unfolded.output)["error"]
        assert error["code"] == "UNAVAILABLE"
        assert "projections status" in error["message"]
    # When a projector starts, status --wait waits for it and shows the committed stage
    pipeline.start_projector()
    shown = runner.invoke(cli, ["status", operation_id, "--wait", "90s", "--json"])
    assert shown.exit_code == 0, shown.output
    status = json.loads(shown.output)
    assert (status["stage"], status["sequence"], status["current"]) == (
        "COMPLETED",
        committed.sequence,
        True,
    )
    assert [t["stage"] for t in status["transitions"]] == [
        "PREPARED",
        "GRAPH_APPLIED",
        "STATE_COMMITTED",
        "COMPLETED",
    ]
