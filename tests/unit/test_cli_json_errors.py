"""Under --json a failure is one JSON object on stdout, with the exit code it has without it;
without --json it is text on stderr, as before. (Failures that need the services: the
integration tests of each command.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.exit_codes import CommandFailure, ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.status import StatusCode
from tests.cli_errors import json_error

pytestmark = pytest.mark.timeout(30)

NO_SCHEMA: dict[str, str | None] = {"GRAPH_INGEST_PLANNER__GRAPH_SCHEMA": None}


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["dlq", "list", "--code", "NOPE", "--json"], "'--code'"),
        (["dlq", "replay-all", "--json", "--limit", "0"], "'--limit'"),
        (["dlq", "show", "--json"], "'DLQ_ID'"),
        (["status", "--json"], "'OP_ID|SUBMISSION_ID'"),
        (["recover", "--json", "--no-such-option"], "--no-such-option"),
        (["reconcile", "--json", "--page-size", "0"], "'--page-size'"),
    ],
)
def test_a_usage_error_under_json_is_json_on_stdout_exit_2(args: list[str], named: str) -> None:
    result = run(*args)

    assert result.exit_code == ExitCode.USAGE
    error = json_error(result)
    assert error["code"] == "INVALID_ARGUMENT"
    assert named in error["message"]


def test_without_json_a_usage_error_is_clicks_usage_on_stderr() -> None:
    result = run("dlq", "list", "--code", "NOPE")

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert "Usage: " in result.stderr and "Invalid value for '--code'" in result.stderr


def test_a_json_after_a_double_dash_is_an_argument_not_the_option() -> None:
    result = run("dlq", "show", "--", "--json", "extra")

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert "unexpected extra argument" in result.stderr


def test_a_usage_error_found_while_running_is_json_under_json(tmp_path: Path) -> None:
    # Given a document and no graph schema to take the schema version from
    document = tmp_path / "notes.txt"
    document.write_text("Alice met Bob.")

    result = run("submit", "--space", "kb", "--json", str(document), env=NO_SCHEMA)

    assert result.exit_code == ExitCode.USAGE
    error = json_error(result)
    assert error["code"] == "INVALID_ARGUMENT"
    assert "--schema-version" in error["message"]
    text = run("submit", "--space", "kb", str(document), env=NO_SCHEMA)
    assert text.exit_code == ExitCode.USAGE and "--schema-version" in text.stderr


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        (StatusCode.NOT_FOUND, ExitCode.NOT_FOUND),
        (StatusCode.UNAVAILABLE, ExitCode.UNAVAILABLE),
        (StatusCode.DEADLINE_EXCEEDED, ExitCode.UNAVAILABLE),
        (StatusCode.FAILED_PRECONDITION, ExitCode.INVALID_INPUT),
        (StatusCode.INTERNAL, ExitCode.ERROR),
    ],
)
def test_a_failure_shows_its_code_and_exits_with_its_named_exit_code(
    code: StatusCode, exit_code: ExitCode, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = CommandFailure("it went wrong", code=code, details="log tail")

    with pytest.raises(SystemExit) as as_json:
        failure.exit(as_json=True)
    assert as_json.value.code == exit_code
    assert json.loads(capsys.readouterr().out) == {
        "error": {
            "code": code.value,
            "exit_code": int(exit_code),
            "message": "it went wrong",
            "details": "log tail",
        }
    }

    with pytest.raises(SystemExit) as as_text:
        CommandFailure("it went wrong", code=code).exit(as_json=False)
    assert as_text.value.code == exit_code
    shown = capsys.readouterr()
    assert (shown.out, shown.err) == ("", f"error [{code.value}]: it went wrong\n")
