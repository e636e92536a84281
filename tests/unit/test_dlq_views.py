"""What the dlq commands print and how they read their options, without services."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from click.testing import CliRunner

from graph_ingest.cli.dlq import replay_exit_code
from graph_ingest.cli.dlq_common import dlq_query as _query
from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.dlq.replayer import Action, ReplayItem, ReplayReport
from graph_ingest.dlq.views import (
    entry_json,
    entry_table,
    format_age,
    replay_item_line,
    replay_summary,
    show_json,
    show_lines,
    stats_json,
    stats_lines,
)
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.store.dlq_index import DlqCount, DlqQuery, DlqStats
from tests.unit.dlq_entries import entry_for, operation_of
from tests.unit.plans import plan_for


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (42.9, "42s"),
        (312, "5m12s"),
        (3600 * 3 + 300, "3h05m"),
        (86400 * 2 + 3600 * 4, "2d04h"),
        (-3, "0s"),
    ],
)
def test_ages_print_in_two_units_at_most(seconds: float, text: str) -> None:
    assert format_age(seconds) == text


# -- options -----------------------------------------------------------------------------------


def test_filters_become_a_query() -> None:
    query = _query(
        "pending_review", "failed_precondition", 5, space="it", document_id="d", older_than_s=300.0
    )
    assert query == DlqQuery(
        status=DlqStatus.PENDING_REVIEW,
        code=StatusCode.FAILED_PRECONDITION,
        space="it",
        document_id="d",
        older_than_s=300.0,
        limit=5,
    )
    assert _query(None, None, None, space=None, document_id=None, older_than_s=None) == DlqQuery()


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--older-than", "5x"],
        ["list", "--status", "LOST"],
        ["list", "--code", "OK"],
        ["list", "--limit", "0"],
        ["replay-all", "--rate", "0"],
        ["purge", "dlq-1"],
    ],
)
def test_bad_options_are_usage_errors_before_any_service_is_asked(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["dlq", *args])
    assert result.exit_code == ExitCode.USAGE, result.output


# -- entries -----------------------------------------------------------------------------------


def test_entries_print_as_an_aligned_table_oldest_first() -> None:
    entries = [entry_for(plan_for("doc-1"), 1), entry_for(None, 2)]
    now = entries[1].dead_lettered_at + timedelta(minutes=5, seconds=3)

    lines = entry_table(entries, now)

    assert " ".join(lines[0].split()) == "DLQ ID STATUS CODE AGE ATTEMPTS DOCUMENT OPERATION"
    assert lines[1].split()[:6] == [
        "dlq-01",
        "PENDING_REVIEW",
        "ABORTED",
        "6m03s",
        "4",
        "unit/doc-1",
    ]
    assert lines[2].split() == ["dlq-02", "PENDING_REVIEW", "ABORTED", "5m03s", "4", "-", "-"]
    assert len({line.index("PENDING") for line in lines[1:]}) == 1
    assert entry_table([], now) == ["no DLQ entries match"]


def test_an_entry_as_json_says_everything_the_table_does() -> None:
    entry = entry_for(plan_for("doc-1"))
    shown = entry_json(entry, entry.dead_lettered_at + timedelta(seconds=90))
    assert shown["dlq_id"] == "dlq-01"
    assert (shown["status"], shown["code"], shown["attempts"], shown["age_s"]) == (
        "PENDING_REVIEW",
        "ABORTED",
        4,
        90.0,
    )
    assert (shown["space"], shown["document_id"]) == ("unit", "doc-1")


def test_show_gives_the_attempts_the_plan_and_the_raw_message() -> None:
    plan = plan_for("doc-1")
    entry = entry_for(plan)
    envelope = decode_dlq_envelope(entry.envelope)
    now = entry.dead_lettered_at + timedelta(hours=2)

    lines = show_lines(entry, envelope, operation_of(plan), now)
    detail = show_json(entry, envelope, operation_of(plan), now)

    text = "\n".join(lines)
    assert f"operation     {plan.operation_id} (stage DEAD_LETTERED)" in text
    assert "3 node upserts, 2 edge upserts, 0 node deletes, 0 edge deletes" in text
    assert "revision 0 -> 1" in text
    assert "(2h00m ago) after 4 attempt(s)" in text
    assert [line.split()[0] for line in lines[-4:]] == ["#1", "#2", "#3", "#4"]
    assert "tier 2" in lines[-1]
    assert detail["plan"]["decodes"] is True
    assert detail["plan"]["node_upserts"] == 3
    assert detail["operation_stage"] == "DEAD_LETTERED"
    assert len(detail["envelope"]["attempts"]) == 4


def test_show_of_a_message_that_is_no_plan_says_why_and_keeps_its_bytes() -> None:
    entry = entry_for(None, original_key=b"\xff\xfe")
    envelope = decode_dlq_envelope(entry.envelope)

    lines = show_lines(entry, envelope, None, entry.dead_lettered_at)
    detail = show_json(entry, envelope, None, entry.dead_lettered_at)

    assert any(line.startswith("plan          none: DecodeError") for line in lines)
    assert "key base64://4=" in "\n".join(lines)
    assert detail["plan"]["decodes"] is False
    assert detail["envelope"]["original_value"] == "AGp1bms="  # b"\x00junk"


def test_folded_attempts_are_shown_where_they_were_folded() -> None:
    entry = entry_for(plan_for("doc-1"), folded_attempts=7)
    envelope = decode_dlq_envelope(entry.envelope)
    lines = show_lines(entry, envelope, None, entry.dead_lettered_at)
    at = lines.index("attempts")
    assert lines[at + 2] == "  … 7 attempts folded"


# -- stats -------------------------------------------------------------------------------------


def test_stats_count_by_status_and_code() -> None:
    stats = DlqStats(
        counts=(
            DlqCount(StatusCode.FAILED_PRECONDITION, DlqStatus.PENDING_REVIEW, 3, 620.0),
            DlqCount(StatusCode.FAILED_PRECONDITION, DlqStatus.REPLAYED, 1, 900.0),
            DlqCount(StatusCode.INVALID_ARGUMENT, DlqStatus.PENDING_REVIEW, 2, 4000.0),
        )
    )

    lines = stats_lines(stats)
    shown = stats_json(stats)

    assert lines[0] == (
        "DLQ: 6 entries: 5 PENDING_REVIEW, 1 REPLAYED, 0 RESOLVED; oldest pending 1h06m"
    )
    assert lines[1].split() == ["CODE", "PENDING_REVIEW", "REPLAYED", "RESOLVED"]
    assert lines[2].split() == ["FAILED_PRECONDITION", "3", "1", "0"]
    assert lines[3].split() == ["INVALID_ARGUMENT", "2", "0", "0"]
    assert shown["by_code"] == {"FAILED_PRECONDITION": 4, "INVALID_ARGUMENT": 2}
    assert shown["by_status"] == {"PENDING_REVIEW": 5, "REPLAYED": 1, "RESOLVED": 0}
    assert shown["oldest_pending_age_s"] == 4000.0
    assert stats_lines(DlqStats(counts=())) == [
        "DLQ: 0 entries: 0 PENDING_REVIEW, 0 REPLAYED, 0 RESOLVED"
    ]


# -- replay runs -------------------------------------------------------------------------------


def report_of(*actions: Action, **fields: object) -> ReplayReport:
    entry = entry_for(plan_for("doc-1"))
    items = tuple(ReplayItem(replace(entry, dlq_id=f"dlq-{i}"), a) for i, a in enumerate(actions))
    return ReplayReport(items=items, **{"dry_run": False, "interrupted": False, **fields})  # type: ignore[arg-type]


def test_a_run_exits_by_its_worst_outcome() -> None:
    down = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="KafkaUnavailable", message="down")
    assert replay_exit_code(report_of(Action.REPLAYED, Action.REPLAYED)) is ExitCode.OK
    assert replay_exit_code(report_of(Action.WOULD_REPLAY)) is ExitCode.OK
    assert replay_exit_code(report_of()) is ExitCode.OK
    assert replay_exit_code(report_of(Action.REPLAYED, Action.WAITING)) is ExitCode.OK
    assert replay_exit_code(report_of(Action.REPLAYED, Action.REFUSED)) is ExitCode.ERROR
    assert replay_exit_code(report_of(Action.REPLAYED, interrupted=True)) is ExitCode.INTERRUPTED
    assert replay_exit_code(report_of(Action.FAILED, stopped=down)) is ExitCode.UNAVAILABLE


def test_a_dry_run_that_ran_exits_0_its_refusals_are_reported_not_failures() -> None:
    dry = {"dry_run": True}
    assert replay_exit_code(report_of(Action.WOULD_REPLAY, Action.REFUSED, **dry)) is ExitCode.OK
    assert replay_exit_code(report_of(Action.REFUSED, Action.WAITING, **dry)) is ExitCode.OK
    interrupted = report_of(Action.REFUSED, interrupted=True, **dry)
    assert replay_exit_code(interrupted) is ExitCode.INTERRUPTED


def test_a_run_prints_a_line_per_entry_and_a_summary() -> None:
    report = report_of(Action.REPLAYED, Action.REFUSED, interrupted=True)
    refused = replace(report.items[1], reason="CONFLICT: a replan is needed")
    line = replay_item_line(refused)
    assert line.startswith("refused      dlq-1 op_") and line.endswith(
        ": CONFLICT: a replan is needed"
    )
    assert replay_summary(report) == (
        "replay-all: 2 seen: 1 replayed, 0 would-replay, 1 refused, 0 waiting, 0 failed; "
        "interrupted: run it again to go on"
    )
