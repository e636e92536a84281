"""What a planner batch commits and reports of its requests (``consumers.planner.handled``)."""

from __future__ import annotations

from datetime import UTC, datetime

from graph_ingest.consumers.planner.handled import (
    DEAD_LETTERED,
    DROPPED,
    PLANNED,
    Handled,
    next_offsets,
    replan_dropped,
)
from graph_ingest.consumers.planner.planning_dlq import PlanningFailure
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.producers.replans import ConflictAction, ReplanMark
from graph_ingest.store.submissions import ReplanOutcome
from tests.unit.plans import plan_for

AT = datetime(2026, 1, 1, tzinfo=UTC)


def request(partition: int, offset: int, submission_id: str | None = None) -> RequestMessage:
    headers = () if submission_id is None else (("submission_id", submission_id.encode()),)
    return RequestMessage("requests", partition, offset, b"s/d", b"{}", headers=headers)


def test_the_batch_commits_the_offset_after_its_last_request_per_partition() -> None:
    handled = [Handled(request(0, 4), None), Handled(request(1, 9), None)]
    handled.append(Handled(request(0, 6), None))
    assert next_offsets(handled) == {("requests", 0): 7, ("requests", 1): 10}


def test_the_outcome_of_a_request_is_its_plan_its_failure_or_nothing() -> None:
    failure = PlanningFailure(request(0, 2), GraphIngestError("bad"), attempts=1, at=AT)
    assert Handled(request(0, 1), None, plan=plan_for("d")).outcome == PLANNED
    assert Handled(request(0, 2), None, failure=failure).outcome == DEAD_LETTERED
    assert Handled(request(0, 3), None).outcome == DROPPED


def test_a_superseded_replan_records_that_and_a_duplicate_records_nothing() -> None:
    mark = ReplanMark(replan_of="op-1", attempt=2)
    message = request(0, 5, submission_id="sub-1")
    superseded = replan_dropped(message, mark, ConflictAction.SUPERSEDED, at=AT)
    assert superseded.outgoing is None and superseded.replan is not None
    assert (superseded.replan.operation_id, superseded.replan.outcome) == (
        "op-1",
        ReplanOutcome.SUPERSEDED,
    )
    assert replan_dropped(message, mark, ConflictAction.DUPLICATE, at=AT).replan is None
