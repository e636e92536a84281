"""`graph-ingest submit`, `retract` and `status` against the real services, through CliRunner."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.request import RequestKind
from graph_ingest.schemas.codec import decode_ingest_request
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA, build_planner
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.planners import build

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def cli_env(pipeline: Pipeline) -> dict[str, str]:
    """The pipeline's settings, and a planner schema file: its version fills --schema-version."""
    return {**pipeline.env(), "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA": str(BUNDLED_GRAPH_SCHEMA)}


def requests_on_topic(pipeline: Pipeline) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    return read_to_end(pipeline.settings, pipeline.settings.topics.requests)


def test_a_directory_submitted_with_wait_is_planned_and_applied(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    pipeline.start_planner(build(pipeline.settings))
    pipeline.start_applier()
    pipeline.start_projector()
    corpus = tmp_path / "corpus"
    (corpus / "team").mkdir(parents=True)
    (corpus / "team" / "alice.txt").write_text("Alice works with Bob.")
    (corpus / "carol.txt").write_text("Carol knows Dave.")

    result = CliRunner(env=cli_env(pipeline)).invoke(
        cli, ["submit", "--space", "kb", "--wait", "--timeout", "2m", "--json", str(corpus)]
    )

    assert result.exit_code == 0, result.output
    reported = json.loads(result.stdout)
    assert {r["key"] for r in reported} == {"kb/team/alice.txt", "kb/carol.txt"}
    assert all(r["completed"] and r["stage"] == "COMPLETED" for r in reported)
    state = pipeline.store.get_document_state("kb", "team/alice.txt")
    assert state is not None and state.revision == 1
    # and `status` finds the operation by the submission id
    shown = CliRunner(env=cli_env(pipeline)).invoke(
        cli, ["status", reported[0]["submission_id"], "--wait", "60s"]
    )
    assert shown.exit_code == 0, shown.output
    assert f"submission  {reported[0]['submission_id']}" in shown.output
    assert "stage       COMPLETED" in shown.output


def test_stdin_and_jsonl_requests_are_sent_with_their_fields(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    runner = CliRunner(env=cli_env(pipeline))
    piped = runner.invoke(
        cli,
        [
            "submit",
            "--space",
            "kb",
            "--document-id",
            "n-1",
            "--version",
            "3",
            "--stale-relations",
            "keep",
            "-",
        ],
        input="Alice met Bob.",
    )
    assert piped.exit_code == 0, piped.output
    lines = tmp_path / "requests.jsonl"
    lines.write_text(
        json.dumps({"document_id": "j-1", "document_version": "1", "content": "One."})
        + "\n"
        + json.dumps(
            {
                "space": "other",
                "document_id": "j-2",
                "document_version": "1",
                "content": "Two.",
                "operation_id": "op-j2",
            }
        )
        + "\n"
    )
    listed = runner.invoke(cli, ["submit", "--space", "kb", str(lines)])
    assert listed.exit_code == 0, listed.output
    assert "op-j2 other/j-2 trace " in listed.stdout

    sent = {key: decode_ingest_request(value) for key, value, _ in requests_on_topic(pipeline)}
    assert set(sent) == {b"kb/n-1", b"kb/j-1", b"other/j-2"}
    assert sent[b"kb/n-1"].content == "Alice met Bob."
    assert sent[b"kb/n-1"].document_version == "3"
    assert sent[b"kb/n-1"].options.stale_relation_policy.value == "KEEP"
    assert sent[b"other/j-2"].operation_id == "op-j2"


def test_oversized_or_malformed_input_sends_nothing(pipeline: Pipeline, tmp_path: Path) -> None:
    env = {**cli_env(pipeline), "GRAPH_INGEST_TOPICS__MAX_MESSAGE_BYTES": "4096"}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Small.")
    (corpus / "b.txt").write_text("x" * 10_000)
    bad_lines = tmp_path / "bad.jsonl"
    bad_lines.write_text(
        json.dumps({"document_id": "ok", "document_version": "1", "content": "x"}) + "\n{oops\n"
    )
    runner = CliRunner(env=env)

    oversized = runner.invoke(cli, ["submit", "--space", "kb", str(corpus)])
    malformed = runner.invoke(cli, ["submit", "--space", "kb", str(bad_lines)])
    unversioned = CliRunner(env=pipeline.env()).invoke(
        cli, ["submit", "--space", "kb", str(corpus / "a.txt")]
    )

    assert oversized.exit_code == ExitCode.INVALID_INPUT, oversized.output
    assert "kb/b.txt is " in oversized.output and "at most 4096" in oversized.output
    assert malformed.exit_code == ExitCode.INVALID_INPUT, malformed.output
    assert "bad.jsonl:2: invalid JSON" in malformed.output
    assert unversioned.exit_code == ExitCode.USAGE, unversioned.output
    assert "pass --schema-version" in unversioned.output
    assert requests_on_topic(pipeline) == []


def test_wait_exits_not_completed_when_the_planner_refuses_a_document(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    pipeline.start_planner(build(pipeline.settings))
    pipeline.start_applier()
    pipeline.start_projector()
    path = tmp_path / "refused.txt"
    path.write_text("PERMANENT")

    result = CliRunner(env=cli_env(pipeline)).invoke(
        cli, ["submit", "--space", "kb", "--wait", "--timeout", "1m", str(path)]
    )

    assert result.exit_code == ExitCode.NOT_COMPLETED, result.output
    assert "not planned: DLQ entry dlq-" in result.stdout
    assert "0 of 1 completed" in result.stderr
    submission_id = result.stdout.split()[0]
    shown = CliRunner(env=cli_env(pipeline)).invoke(cli, ["status", submission_id, "--wait", "60s"])
    assert shown.exit_code == 0 and "not planned: DLQ entry" in shown.output
    listed = CliRunner(env=cli_env(pipeline)).invoke(cli, ["dlq", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    (entry,) = json.loads(listed.stdout)["entries"]
    assert (entry["space"], entry["document_id"]) == ("kb", "refused.txt")
    assert entry["original_topic"] == pipeline.settings.topics.requests


def test_source_updated_at_is_sent_and_an_older_time_is_refused_as_out_of_order(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    # Given the real planner (it keeps the source time in the state and checks the order), an
    # applier, and a document changed at 09:30 UTC (given as +01:00)
    settings = pipeline.real_planner_settings()
    pipeline.start_planner(build_planner(settings), settings)
    pipeline.start_applier()
    pipeline.start_projector()
    path = tmp_path / "notes.txt"
    path.write_text("Bob is a member of the Payments Team.")
    runner = CliRunner(env=cli_env(pipeline))

    def submit(version: str, source_time: str) -> Result:
        return runner.invoke(
            cli,
            [
                *("submit", "--space", "kb", "--version", version, "--wait", "--timeout", "2m"),
                *("--source-updated-at", source_time, str(path)),
            ],
        )

    # When it is submitted with its source time
    first = submit("v1", "2026-12-01T10:30:00+01:00")

    # Then the request carries it, and the document's state has it
    assert first.exit_code == 0, first.output
    ((_key, value, _headers),) = requests_on_topic(pipeline)
    nine_thirty = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert decode_ingest_request(value).source_updated_at == nine_thirty
    state = pipeline.store.get_document_state("kb", "notes.txt")
    assert state is not None and state.source_updated_at == nine_thirty

    # When a later version says the source changed before that
    path.write_text("Bob is a member of the Payments Team. The Payments Team owns the Ledger.")
    older = submit("v2", "2026-12-01T09:00:00Z")

    # Then the planner refuses it as out of order: not completed, the state unchanged
    assert older.exit_code == ExitCode.NOT_COMPLETED, older.output
    assert "not planned: DLQ entry dlq-" in older.stdout
    unchanged = pipeline.store.get_document_state("kb", "notes.txt")
    assert unchanged is not None and unchanged.document_version == "v1"
    listed = runner.invoke(cli, ["dlq", "list", "--json"])
    (entry,) = json.loads(listed.stdout)["entries"]
    assert entry["code"] == "FAILED_PRECONDITION" and "out of order" in entry["message"]


def test_retract_sends_a_retraction_request(pipeline: Pipeline) -> None:
    result = CliRunner(env=cli_env(pipeline)).invoke(
        cli, ["retract", "--space", "kb", "--document-id", "n-1"]
    )

    assert result.exit_code == 0, result.output
    ((key, value, _),) = requests_on_topic(pipeline)
    request = decode_ingest_request(value)
    assert key == b"kb/n-1" and request.kind is RequestKind.RETRACT
