"""What `status` makes of a view, without services: when a projected status is current, the
text of a stale one, every transition with its own time (FAILED -> PREPARED -> DEAD_LETTERED
keeps both PREPAREDs), a submission's path, and JSON that names the same things."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from graph_ingest.cli.operations import view_json, view_lines
from graph_ingest.cli.ops import json_default
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.fold import OperationStatus, fold_all
from graph_ingest.projections.operation_views import OperationView, SubmissionView
from graph_ingest.projections.queries import ProjectedStatus
from graph_ingest.store.submissions import Submission
from tests.operation_histories import COMPLETED, DEAD_LETTERED_AFTER_RETRY, history

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
