"""The console's pure views: raw bytes as hex, an operation's history as a timeline, and a list
page's filters from its query string (a bad value is InvalidQuery, named)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.api.console.views import (
    dlq_query,
    hex_lines,
    operation_filter,
    timeline,
    utf8_or_none,
)
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import Transition
from graph_ingest.projections.queries import InvalidQuery, OperationFilter

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def test_hex_lines_show_offset_hex_and_printable_text() -> None:
    lines = hex_lines(b"it/doc-1\x00\xff" + bytes(range(0x41, 0x47)))

    assert lines == [
        "00000000  69 74 2f 64 6f 63 2d 31 00 ff 41 42 43 44 45 46  it/doc-1..ABCDEF",
    ]
    assert hex_lines(b"ab") == ["00000000  61 62" + " " * 42 + "  ab"]
    assert hex_lines(None) == [] and hex_lines(b"") == []


def test_hex_lines_stop_at_the_limit_and_say_how_much_is_left() -> None:
    lines = hex_lines(bytes(100), limit=32)

    assert len(lines) == 3
    assert lines[1].startswith("00000010  00")
    assert lines[-1] == "… 68 more bytes"
    assert len(hex_lines(bytes(32), limit=32)) == 2  # exactly the limit: nothing left to say


def test_utf8_or_none() -> None:
    assert utf8_or_none(b"it/doc") == "it/doc"
    assert utf8_or_none(b"\xff\xfe") is None
    assert utf8_or_none(None) is None


def test_the_timeline_keeps_every_step_with_its_time_and_marks_retries_in_place() -> None:
    steps = timeline(
        (
            Transition(1, Stage.PREPARED, T0, 0),
            Transition(2, Stage.PREPARED, T0 + timedelta(seconds=2), 1),
            Transition(3, Stage.FAILED, T0 + timedelta(seconds=3), 1),
            Transition(4, Stage.PREPARED, T0 + timedelta(seconds=5), 1),
            Transition(5, Stage.DEAD_LETTERED, T0 + timedelta(seconds=5.5), 2),
            Transition(6, Stage.DEAD_LETTERED, T0 + timedelta(seconds=6), 2),
        )
    )

    assert [s.stage for s in steps] == [
        Stage.PREPARED,
        Stage.PREPARED,
        Stage.FAILED,
        Stage.PREPARED,
        Stage.DEAD_LETTERED,
        Stage.DEAD_LETTERED,
    ]
    assert [s.after_s for s in steps] == [None, 2.0, 1.0, 2.0, 0.5, 0.5]
    # a snapshot with the stage and attempts unchanged (a status change) is no retry
    assert [s.retried_in_place for s in steps] == [False, True, False, False, False, False]


def test_filters_are_read_case_blind_and_blanks_mean_any() -> None:
    params = {"stage": "dead_lettered", "space": " it ", "document": "", "error_code": ""}

    assert operation_filter(params) == OperationFilter(stage=Stage.DEAD_LETTERED, space="it")
    query = dlq_query({"status": "pending_review", "code": "FAILED_PRECONDITION", "document": "d"})
    assert (query.status, query.code, query.document_id) == (
        DlqStatus.PENDING_REVIEW,
        StatusCode.FAILED_PRECONDITION,
        "d",
    )


@pytest.mark.parametrize(
    ("params", "named"),
    [({"stage": "DONE"}, "stage must be one of PREPARED"), ({"error_code": "x"}, "error_code")],
)
def test_a_bad_filter_value_is_an_invalid_query_that_names_it(
    params: dict[str, str], named: str
) -> None:
    with pytest.raises(InvalidQuery, match=named):
        operation_filter(params)
