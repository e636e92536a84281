"""`submit --wait`'s idea of a final submission: a CONFLICT is final only once no replan will come."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.producers.follow import Followed
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SUBMISSION = Submission(
    submission_id="sub-1",
    space="kb",
    document_id="doc",
    operation_id="op-1",
    dlq_id=None,
    trace_id=None,
    source=("requests", 0, 0),
    planned_at=T0,
)


def conflicted() -> Operation:
    prepared = Operation.prepared(
        operation_id="op-1",
        space="kb",
        document_id="doc",
        expected_revision=0,
        fingerprint="v1:x",
        at=T0,
    )
    return prepared.transition(Stage.CONFLICT, T0)


def replan(outcome: ReplanOutcome) -> Replan:
    return Replan("op-1", "sub-1", 1, outcome, T0, replanned_as="op-2", dlq_id="dlq-1")


def test_a_conflict_not_handled_yet_or_being_replanned_is_not_final() -> None:
    assert not Followed("sub-1", SUBMISSION, conflicted()).final
    for outcome in (ReplanOutcome.REQUESTED, ReplanOutcome.REPLANNED):
        followed = Followed("sub-1", SUBMISSION, conflicted(), replan(outcome))
        assert not followed.final, outcome


@pytest.mark.parametrize(
    ("outcome", "where"),
    [
        (ReplanOutcome.SUPERSEDED, "superseded by a newer submission"),
        (ReplanOutcome.DEAD_LETTERED, "replans exhausted: DLQ entry dlq-1"),
    ],
)
def test_a_conflict_no_replan_will_follow_is_final_and_not_completed(
    outcome: ReplanOutcome, where: str
) -> None:
    followed = Followed("sub-1", SUBMISSION, conflicted(), replan(outcome))
    assert followed.final and not followed.completed
    assert where in followed.where
