"""What `status` makes of a view, without services: when a projected status is current, the
text of a stale one, every transition with its own time (FAILED -> PREPARED -> DEAD_LETTERED
keeps both PREPAREDs), a submission's path, and JSON that names the same things."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from graph_ingest.cli.operations import view_json, view_lines
from graph_ingest.cli.ops import json_default
from graph_ingest.domain.operation import OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.fold import OperationStatus, fold_all
from graph_ingest.projections.operation_views import (
    MAX_PARKED_CHAIN,
    OperationView,
    StatusViews,
    SubmissionView,
)
from graph_ingest.projections.queries import OperationQueries, ProjectedStatus
from graph_ingest.store.submissions import Submission
from tests.operation_histories import (
    COMPLETED,
    DEAD_LETTERED_AFTER_RETRY,
    failure_ids,
    history,
)

pytestmark = pytest.mark.timeout(30)


def folded(operation_id: str, path: Sequence[Stage]) -> OperationStatus:
    status, _ = fold_all(None, history(operation_id, path))
    assert status is not None
    return status


def view(status: OperationStatus, committed: int | None = None) -> OperationView:
    seen = ProjectedStatus(status, status.sequence if committed is None else committed)
    return OperationView(
        status=status,
        current=seen.current,
        committed_sequence=seen.committed_sequence,
        plan_kind=PlanKind.INGESTION,
        base_operation_id=None,
        failures=(),
        replan=None,
        replan_of=None,
        submission=None,
    )


@pytest.mark.parametrize(
    ("projected", "committed", "current"),
    [
        (None, None, True),  # neither side knows it: nothing to wait for
        (None, 1, False),  # committed, not folded yet
        (3, 4, False),  # folded, but the write side has moved on
        (4, 4, True),
        (5, 4, True),  # read after the write side: newer than what it had committed then
    ],
)
def test_a_projected_status_is_current_once_it_reached_the_committed_sequence(
    projected: int | None, committed: int | None, current: bool
) -> None:
    status = None if projected is None else replace(folded("op", ()), sequence=projected)
    assert ProjectedStatus(status, committed).current is current


def test_every_transition_is_shown_with_its_own_time_and_a_stale_view_says_so() -> None:
    dead = folded("op-dead", DEAD_LETTERED_AFTER_RETRY)
    lines = view_lines(view(dead, committed=dead.sequence + 2), max_replans=3)
    steps = lines[lines.index("transitions") + 1 :][: len(dead.transitions)]
    assert [line.split()[:2] for line in steps] == [
        ["1", "PREPARED"],
        ["2", "FAILED"],
        ["3", "PREPARED"],
        ["4", "DEAD_LETTERED"],
    ]
    assert "2026-12-01T03:00:02+00:00" in steps[2]  # the second PREPARED, with its own time
    assert any(
        line.startswith("stale       the projection has seen sequence 4 of 6") for line in lines
    )
    assert not any(line.startswith("stale") for line in view_lines(view(dead), max_replans=3))


def test_a_submission_shows_its_path_and_json_names_each_step() -> None:
    conflicted, replanned = folded("op-1", (Stage.CONFLICT,)), folded("op-2", COMPLETED)
    submission = Submission(
        submission_id="sub-1",
        space="it",
        document_id="doc",
        operation_id="op-3",
        dlq_id=None,
        trace_id=None,
        source=("requests", 0, 7),
        planned_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    shown = SubmissionView(submission, (view(conflicted), view(replanned)), unseen=("op-3",))
    lines = view_lines(shown, max_replans=3)
    assert lines[:3] == [
        "submission  sub-1",
        "document    it/doc",
        "path        op-1 CONFLICT -> op-2 COMPLETED -> op-3 not applied yet",
    ]
    document = json.loads(json.dumps(view_json(shown), default=json_default))
    assert [(s["operation_id"], s["stage"], s["plan_kind"]) for s in document["path"]] == [
        ("op-1", "CONFLICT", "INGESTION"),
        ("op-2", "COMPLETED", "INGESTION"),
    ]
    assert (document["unseen"], document["issue_count"]) == (["op-3"], 0)


def test_each_step_shows_the_error_it_recorded_with_its_ids() -> None:
    dead = folded("op-dead", DEAD_LETTERED_AFTER_RETRY)
    lines = view_lines(view(dead), max_replans=3)
    steps = lines[lines.index("transitions") + 1 :][: len(dead.transitions)]
    failed, retried, dead_lettered = failure_ids("op-dead", 1), steps[2], failure_ids("op-dead", 3)
    assert f"UNAVAILABLE Neo4jDown: down (error {failed['error_id']}" in steps[1]
    assert f"trace {failed['trace_id']})" in steps[1]
    assert "error" not in retried and "Neo4jDown" not in steps[0]  # recorded none of its own
    assert f"(error {dead_lettered['error_id']}" in steps[3]
    # and JSON names the same error on the same steps
    document = json.loads(json.dumps(view_json(view(dead)), default=json_default))
    assert [t["error"] and t["error"]["error_id"] for t in document["transitions"]] == [
        None,
        failed["error_id"],
        None,
        dead_lettered["error_id"],
    ]
    assert (document["plan_kind"], document["submission_id"]) == ("INGESTION", "sub-op-dead")
    assert "submission  sub-op-dead" in lines


def test_an_outage_waited_out_is_shown_with_its_duration() -> None:
    start = datetime(2026, 12, 1, 3, 0, 5, tzinfo=UTC)
    wait = OutageWait(dependency="neo4j", started_at=start, ended_at=start + timedelta(minutes=6))
    held = replace(folded("op-held", COMPLETED), waits=(wait,))
    lines = view_lines(view(held), max_replans=3)
    [shown] = [line for line in lines if line.startswith("waited out")]
    assert shown.startswith("waited out  neo4j outage from 2026-12-01T03:00:05+00:00 to ")
    assert "(6m00s)" in shown
    document = json.loads(json.dumps(view_json(view(held)), default=json_default))
    assert [(w["dependency"], w["seconds"]) for w in document["waits"]] == [("neo4j", 360.0)]
    assert document["waits"][0]["ended_at"] == "2026-12-01T03:06:05+00:00"
    unheld = view_lines(view(folded("op-done", COMPLETED)), max_replans=3)
    assert not any(line.startswith("waited out") for line in unheld)


def test_a_failed_operation_names_its_next_retry_and_tier() -> None:
    failed = replace(
        folded("op-failed", (Stage.FAILED,)),
        retry_tier=1,
        next_retry_at=datetime(2026, 12, 1, 3, 1, tzinfo=UTC),
    )
    lines = view_lines(view(failed), max_replans=3)
    assert "next retry  2026-12-01T03:01:00+00:00 on retry tier 1" in lines
    assert view_json(view(failed))["retry_tier"] == 1


class ReadTable:
    """The read service's one lookup the chain walk makes, over statuses in memory."""

    def __init__(self, *statuses: OperationStatus) -> None:
        self.rows = {status.operation_id: status for status in statuses}

    def operation_status(self, operation_id: str) -> OperationStatus | None:
        return self.rows.get(operation_id)


def behind(operation_id: str, leader: str | None) -> OperationStatus:
    return replace(folded(operation_id, (Stage.PARKED,)), parked_behind=leader)


def test_a_parked_operation_shows_the_chain_it_waits_behind_bounded() -> None:
    # Given v3 parked behind v2, parked behind v1 (which waits for nothing)
    v3, v2, v1 = behind("v3", "v2"), behind("v2", "v1"), behind("v1", None)
    views = StatusViews(cast("OperationQueries", ReadTable(v3, v2, v1)), cast("Any", None))
    assert views.parked_chain(v3) == ("v2", "v1")
    shown = replace(view(v3), parked_chain=views.parked_chain(v3))
    assert "waits for   v2 -> v1" in view_lines(shown, max_replans=3)
    assert view_json(shown)["parked_chain"] == ["v2", "v1"]
    # and rows that point round in a circle, or on and on, are followed a bounded way
    circle = ReadTable(behind("a", "b"), behind("b", "a"))
    assert StatusViews(cast("OperationQueries", circle), cast("Any", None)).parked_chain(
        behind("a", "b")
    ) == ("b", "a")
    long = ReadTable(*(behind(f"op{i}", f"op{i + 1}") for i in range(50)))
    chain = StatusViews(cast("OperationQueries", long), cast("Any", None)).parked_chain(
        behind("op0", "op1")
    )
    assert chain == tuple(f"op{i}" for i in range(1, MAX_PARKED_CHAIN + 1))
    assert f"waits for   {' -> '.join(chain)} -> ..." in view_lines(
        replace(view(v3), parked_chain=chain), max_replans=3
    )
