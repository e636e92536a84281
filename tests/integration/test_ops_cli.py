"""`graph-ingest ops list` over the read service on real PostgreSQL: every filter, pages that
neither repeat nor skip, the next cursor printed; a bad filter, limit or cursor is a usage error
(exit 2) with a message, JSON under --json."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import at_offsets, opened_read_tables
from tests.operation_histories import histories

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

OPERATIONS = 23


@pytest.fixture
def runner(pipeline: Pipeline) -> CliRunner:
    """A CLI on the pipeline's read tables, holding the folded histories of OPERATIONS
    operations over every path (``tests.operation_histories``)."""
    with opened_read_tables(pipeline.settings) as tables:
        tables.fold(at_offsets(histories(OPERATIONS)))
    return CliRunner(env=pipeline.env())


def listed(runner: CliRunner, *args: str) -> dict[str, Any]:
    result = runner.invoke(cli, ["ops", "list", *args, "--json"])
    assert result.exit_code == 0, result.output
    page: dict[str, Any] = json.loads(result.output)
    return page


def ids(page: dict[str, Any]) -> set[str]:
    return {status["operation_id"] for status in page["operations"]}


def test_pages_follow_the_printed_cursor_and_show_each_operation_once(runner: CliRunner) -> None:
    seen: list[str] = []
    cursor: list[str] = []
    while True:
        page = listed(runner, "--limit", "5", *cursor)
        seen += [status["operation_id"] for status in page["operations"]]
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert sorted(seen) == [f"op-{i:03d}" for i in range(OPERATIONS)]
    # and the text form prints a line per operation, then the cursor of the next page
    text = runner.invoke(cli, ["ops", "list", "--limit", "5"])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert len(lines) == 6 and lines[-1].startswith("next cursor ")
    assert listed(runner, "--cursor", lines[-1].removeprefix("next cursor "))["operations"]


def test_every_filter_selects_what_the_folded_histories_hold(runner: CliRunner) -> None:
    dead = listed(runner, "--stage", "dead_lettered")
    assert ids(dead) == {f"op-{i:03d}" for i in range(1, OPERATIONS, 5)}
    assert {s["stage"] for s in dead["operations"]} == {"DEAD_LETTERED"}
    failed_on_doc_1 = listed(runner, "--error-code", "UNAVAILABLE", "--document", "doc-1")
    assert ids(failed_on_doc_1) == {"op-001", "op-021"}
    assert failed_on_doc_1["operations"][0]["last_error"]["code"] == "UNAVAILABLE"
    assert ids(listed(runner, "--space", "elsewhere")) == set()
    # the histories were written on 2026-12-01: older than an hour, not older than 30 days
    assert len(ids(listed(runner, "--older-than", "1h", "--limit", "100"))) == OPERATIONS
    assert ids(listed(runner, "--older-than", "30d")) == set()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--stage", "DONE"], "'DONE' is not one of"),
        (["--error-code", "OOPS"], "'OOPS' is not one of"),
        (["--older-than", "soon"], "is not a duration"),
        (["--limit", "0"], "limit must be between 1 and 1000"),
        (["--cursor", "not-a-cursor"], "not a cursor this service gave out"),
    ],
)
def test_a_bad_filter_is_a_usage_error_with_a_message(
    runner: CliRunner, args: list[str], says: str
) -> None:
    text: Result = runner.invoke(cli, ["ops", "list", *args])
    assert text.exit_code == ExitCode.USAGE, text.output
    assert says in text.output
    as_json = runner.invoke(cli, ["ops", "list", *args, "--json"])
    assert as_json.exit_code == ExitCode.USAGE, as_json.output
    error = json.loads(as_json.output)["error"]
    assert (error["exit_code"], error["code"]) == (2, "INVALID_ARGUMENT")
    assert says in error["message"]
