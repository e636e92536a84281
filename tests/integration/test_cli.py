"""The CLI against the real services, through click's CliRunner."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from tests.cli_errors import json_error, not_found
from tests.integration.pipeline import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan.json"


def test_publish_plan_then_status_follows_it_to_completed(pipeline: Pipeline) -> None:
    runner = CliRunner(env=pipeline.env())
    pipeline.start_applier()
    pipeline.start_projector()
    published = runner.invoke(cli, ["publish-plan", str(EXAMPLE)])
    assert published.exit_code == 0, published.output
    operation_id = re.search(r"published (op_\w+)", published.output).group(1)  # type: ignore[union-attr]
    pipeline.wait_stage(operation_id, Stage.COMPLETED)
    shown = runner.invoke(cli, ["status", operation_id, "--wait", "60s", "--json"])
    assert shown.exit_code == 0, shown.output
    status = json.loads(shown.output)
    assert status["stage"] == "COMPLETED"
    assert status["document_id"] == "notes-1843"
    assert status["current"] is True
    assert [t["stage"] for t in status["transitions"]] == [
        "PREPARED",
        "GRAPH_APPLIED",
        "STATE_COMMITTED",
        "COMPLETED",
    ]
    assert (status["plan_kind"], status["base_operation_id"]) == ("INGESTION", None)
    human = runner.invoke(cli, ["status", operation_id])
    assert "stage       COMPLETED" in human.output
    assert "plan        INGESTION, planned on no state (a new document)" in human.output


def test_status_of_an_unknown_operation_exits_not_found(pipeline: Pipeline) -> None:
    result = CliRunner(env=pipeline.env()).invoke(cli, ["status", "op_nope"])
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "not found" in result.output


def test_under_json_an_unknown_operation_is_a_json_error_with_exit_code_3(
    pipeline: Pipeline,
) -> None:
    runner = CliRunner(env=pipeline.env())
    for command in ("status", "resume"):
        result = runner.invoke(cli, [command, "op_nope", "--json"])

        assert result.exit_code == ExitCode.NOT_FOUND, result.output
        assert json_error(result) == not_found("operation op_nope not found")


def test_publish_plan_refuses_a_tampered_plan_and_publishes_nothing(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    plan = json.loads(EXAMPLE.read_text())
    plan["fingerprint"] = "v1:" + "0" * 64
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    result = CliRunner(env=pipeline.env()).invoke(cli, ["publish-plan", str(bad)])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "fingerprint" in result.output
    assert str(bad) in result.output


def test_publish_plan_names_the_field_of_an_invalid_plan(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    plan = json.loads(EXAMPLE.read_text())
    plan["mutation"]["node_upserts"][0]["labels"] = ["x) DETACH DELETE n //"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    result = CliRunner(env=pipeline.env()).invoke(cli, ["publish-plan", str(bad)])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "labels" in result.output
