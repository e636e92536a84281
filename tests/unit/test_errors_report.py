"""`errors report` without services: the range check (exit 2, JSON under --json) and the three
renderings of a report."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from graph_ingest.cli.errors_report import _rendered
from graph_ingest.cli.main import cli
from graph_ingest.projections.errors_report import ErrorGroup, ErrorsReport, check_range
from graph_ingest.projections.queries import InvalidQuery

pytestmark = pytest.mark.timeout(30)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
REPORT = ErrorsReport(
    start=T0,
    end=T0 + timedelta(hours=1),
    groups=(
        ErrorGroup("DEADLINE_EXCEEDED", "Timeout", 4, 1, T0, T0 + timedelta(minutes=2), ("op-1",)),
        ErrorGroup("FAILED_PRECONDITION", "ParkedBehind", 2, 2, T0, T0, ("op-2", "op-3")),
    ),
)


@pytest.mark.parametrize(
    ("start", "end", "why"),
    [
        (T0, T0, "empty"),
        (T0 + timedelta(seconds=1), T0, "empty"),
        (T0.replace(tzinfo=None), T0 + timedelta(1), "timezone"),
    ],
)
def test_a_range_that_is_empty_backwards_or_naive_is_refused(
    start: datetime, end: datetime, why: str
) -> None:
    with pytest.raises(InvalidQuery, match=why):
        check_range(start, end)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_backwards_range_exits_2_with_a_message(as_json: bool) -> None:
    args = ["errors", "report", "--from", "2026-12-02T00:00:00Z", "--to", "2026-12-01T00:00:00Z"]
    result = CliRunner().invoke(cli, [*args, *(["--json"] if as_json else [])])
    assert result.exit_code == 2
    if as_json:
        assert "range is empty" in json.loads(result.output)["error"]["message"]
    else:
        assert "range is empty" in result.output


def test_a_time_without_timezone_exits_2() -> None:
    args = ["errors", "report", "--from", "2026-12-01T00:00:00", "--to", "2026-12-02T00:00:00Z"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "timezone" in result.output


def test_the_report_as_json_csv_and_table() -> None:
    as_json = json.loads(_rendered(REPORT, "json"))
    assert as_json["failures"] == 6
    assert [g["code"] for g in as_json["groups"]] == ["DEADLINE_EXCEEDED", "FAILED_PRECONDITION"]
    assert as_json["groups"][1]["example_operation_ids"] == ["op-2", "op-3"]
    rows = list(csv.DictReader(io.StringIO(_rendered(REPORT, "csv"))))
    assert [(r["code"], r["failures"], r["example_operation_ids"]) for r in rows] == [
        ("DEADLINE_EXCEEDED", "4", "op-1"),
        ("FAILED_PRECONDITION", "2", "op-2 op-3"),
    ]
    table = _rendered(REPORT, "table")
    assert table.startswith("6 failure(s) from 2026-12-01T09:00:00+00:00")
    assert "ParkedBehind" in table and "op-2, op-3" in table
