"""The replan decisions: what a CONFLICT leads to, whether a re-submitted request still stands,
the headers and the derived operation id."""

from __future__ import annotations

import pytest

from graph_ingest.domain.limits import MAX_ID_LENGTH
from graph_ingest.producers.replans import (
    ConflictAction,
    ReplanMark,
    on_conflict,
    replan_mark,
    replan_marks,
    replan_operation_id,
    replan_standing,
)
from graph_ingest.schemas.request_messages import resubmitted_request
from graph_ingest.store.submissions import Submission
from tests.unit.planning_fakes import T0

pytestmark = pytest.mark.timeout(30)


def submission(submission_id: str, operation_id: str | None, offset: int = 0) -> Submission:
    return Submission(
        submission_id=submission_id,
        space="kb",
        document_id="doc",
        operation_id=operation_id,
        dlq_id=None,
        trace_id=None,
        source=("requests", 0, offset),
        planned_at=T0,
    )


S = submission("sub-1", "op-1")


@pytest.mark.parametrize(
    ("planned_from", "newest", "attempt", "expected"),
    [
        (None, None, 1, ConflictAction.IGNORE),  # published by hand, not planned
        (S, S, 1, ConflictAction.REPLAN),
        (S, S, 3, ConflictAction.REPLAN),  # the last one allowed
        (S, S, 4, ConflictAction.DEAD_LETTER),
        (S, submission("sub-2", "op-2", 5), 1, ConflictAction.SUPERSEDED),
        (S, submission("sub-1", "op-1b", 7), 1, ConflictAction.DUPLICATE),  # replanned already
    ],
)
def test_what_a_conflict_leads_to(
    planned_from: Submission | None, newest: Submission | None, attempt: int, expected: str
) -> None:
    assert on_conflict("op-1", planned_from, newest, attempt=attempt, max_replans=3) == expected


def test_a_replan_stands_while_its_submission_is_the_newest_and_still_bound_to_the_conflict() -> (
    None
):
    mark = ReplanMark("op-1", 1)
    assert replan_standing(mark, "sub-1", S, None) is ConflictAction.REPLAN
    assert replan_standing(mark, "sub-1", S, "op-1b") is ConflictAction.REPLAN
    # a newer request came first
    newer = submission("sub-2", "op-2", 5)
    assert replan_standing(mark, "sub-1", newer, None) is ConflictAction.SUPERSEDED
    assert replan_standing(mark, None, S, None) is ConflictAction.SUPERSEDED
    # bound to this very plan already: an aborted publish planned again
    bound = submission("sub-1", "op-1b", 5)
    assert replan_standing(mark, "sub-1", bound, "op-1b") is ConflictAction.REPLAN
    # bound to another replan already: a second copy
    assert replan_standing(mark, "sub-1", bound, "op-1c") is ConflictAction.DUPLICATE


def test_a_replan_replaces_the_previous_replan_marks_and_keeps_the_requests_own_headers() -> None:
    headers = (
        ("submission_id", b"sub-1"),
        ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("replan_of", b"op-0"),
        ("replan_attempt", b"1"),
        ("dlq_replay", b"dlq-1"),
    )
    made = resubmitted_request(
        "ingest.requests", b"k", b"v", headers, replan_marks(ReplanMark("op-1", 2))
    ).headers
    assert made == {
        "submission_id": "sub-1",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "replan_of": "op-1",
        "replan_attempt": "2",
    }
    as_read = tuple((k, v.encode()) for k, v in made.items())
    assert replan_mark(as_read) == ReplanMark("op-1", 2)


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("replan_of", b"op-1"),),
        (("replan_of", b"op-1"), ("replan_attempt", b"x")),
        (("replan_of", b"op-1"), ("replan_attempt", b"0")),
        (("replan_of", b"\xff"), ("replan_attempt", b"1")),
        # values ingest_replans cannot hold: recorded, they would fail every planning of the batch
        (("replan_of", b"op-\x00"), ("replan_attempt", b"1")),
        (("replan_of", b"o" * 5_000), ("replan_attempt", b"1")),
        (("replan_of", b"op-1"), ("replan_attempt", b"9" * 12)),
        (("replan_of", b"op-1"), ("replan_attempt", b"9" * 5_000)),
        # digits int() does not read
        (("replan_of", b"op-1"), ("replan_attempt", "²".encode())),
    ],
)
def test_a_request_without_proper_replan_headers_is_no_replan(
    headers: tuple[tuple[str, bytes], ...],
) -> None:
    assert replan_mark(headers) is None


def test_a_derived_operation_id_is_distinct_per_attempt_and_fits() -> None:
    assert replan_operation_id("op-1", 1) == "op-1~replan1"
    assert replan_operation_id("op-1", 1) != replan_operation_id("op-1", 2)
    long = "x" * MAX_ID_LENGTH
    derived = replan_operation_id(long, 3)
    assert len(derived) <= MAX_ID_LENGTH and derived.endswith("~replan3")
    assert derived == replan_operation_id(long, 3)
