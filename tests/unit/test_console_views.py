"""The console's pure views: raw bytes as hex, an operation's history as a timeline (each step
with the failure it recorded), the chain an operation is parked behind, and a list page's
filters and cursor from its query string (a bad value is InvalidQuery, named)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.api.console.task_pages import task_selection
from graph_ingest.api.console.views import (
    dlq_query,
    hex_lines,
    operation_filter,
    timeline,
    utf8_or_none,
)
from graph_ingest.api.console.worker_pages import dependency_modes
from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus, Transition
from graph_ingest.projections.operation_views import parked_chain
from graph_ingest.projections.queries import InvalidQuery, OperationFilter, encode_keyset
from tests.operation_histories import DEAD_LETTERED_AFTER_RETRY, history

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


def test_each_timeline_step_carries_the_failure_it_recorded_not_the_one_carried_on() -> None:
    snapshots = history("op-1", DEAD_LETTERED_AFTER_RETRY)
    steps = timeline(tuple(Transition.of(s) for s in snapshots))

    failed, replanned, dead = snapshots[1].last_error, snapshots[2], snapshots[3].last_error
    assert failed is not None and dead is not None and failed.error_id != dead.error_id
    assert replanned.last_error == failed  # carried on by PREPARED: not its own failure
    assert [s.error for s in steps] == [None, failed, None, dead]
    assert steps[1].error and steps[1].error.trace_id


def _parked(operation_id: str, behind: str | None) -> OperationStatus:
    [prepared] = history(operation_id, ())
    operation = prepared.model_copy(update={"stage": Stage.PARKED, "parked_behind": behind})
    return OperationStatus.of(operation, ())


def test_the_parked_chain_follows_each_link_and_stops_at_the_end_a_cycle_or_the_limit() -> None:
    known = {s.operation_id: s for s in (_parked("b", "c"), _parked("c", None))}
    chain = parked_chain("b", known.get)
    assert [(link.operation_id, link.status) for link in chain] == [
        ("b", known["b"]),
        ("c", known["c"]),
    ]
    # an operation the read table lacks ends the chain, said as unknown
    assert [(link.operation_id, link.status) for link in parked_chain("x", known.get)] == [
        ("x", None)
    ]
    assert parked_chain(None, known.get) == []
    looped = {"p": _parked("p", "q"), "q": _parked("q", "p")}
    assert [link.operation_id for link in parked_chain("p", looped.get)] == ["p", "q"]
    endless = {f"o{i}": _parked(f"o{i}", f"o{i + 1}") for i in range(50)}
    assert len(parked_chain("o0", endless.get, limit=5)) == 5


def test_the_dlq_list_reads_its_cursor_and_names_a_bad_one() -> None:
    cursor = encode_keyset(T0, "dlq-7")

    assert dlq_query({"cursor": cursor}).after == (T0, "dlq-7")
    assert dlq_query({"cursor": ""}).after is None
    with pytest.raises(InvalidQuery, match="not a cursor this service gave out"):
        dlq_query({"cursor": "nonsense"})


def test_every_known_dependency_has_a_mode_automatic_unless_forced() -> None:
    forced = BreakerControl(
        dependency="neo4j", mode=BreakerMode.FORCED_OPEN, by="oncall", reason="upgrade", at=T0
    )
    other = forced.model_copy(update={"dependency": "kafka", "mode": BreakerMode.FORCED_CLOSED})

    modes = dependency_modes({"neo4j": forced, "kafka": other})

    assert [(m.dependency, m.mode, m.control) for m in modes] == [
        ("kafka", BreakerMode.FORCED_CLOSED, other),
        ("neo4j", BreakerMode.FORCED_OPEN, forced),
        ("postgres", BreakerMode.AUTOMATIC, None),
    ]


def test_a_redrive_takes_every_entry_the_list_filters_select_not_its_page() -> None:
    params = {"status": "RESOLVED", "code": "FAILED_PRECONDITION", "space": "it"}
    selection = task_selection({**params, "cursor": encode_keyset(T0, "dlq-7")})

    assert (selection.code, selection.space) == (StatusCode.FAILED_PRECONDITION, "it")
    assert (selection.status, selection.limit, selection.after) == (None, None, None)
