"""Following submissions to their final stage (``graph-ingest submit --wait``).

A submission is final when the planner sent it to the DLQ, or when its operation is COMPLETED or
DEAD_LETTERED. PARKED (waiting behind an earlier version) and FAILED (in a retry tier) are not:
they move on by themselves. Nor is a CONFLICT, as long as a replan may come: the planner worker
replans the newest submission of a document (``consumers.planner.conflicts``) and the submission then
points at the replan's operation, which is followed in turn. A CONFLICT is final once its replan
record says none will come: a newer submission superseded it, or its replans ran out (a planning
DLQ entry).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.store.base import OperationStore
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission

_FINAL = frozenset({Stage.COMPLETED, Stage.DEAD_LETTERED})
_NO_REPLAN_COMING = frozenset({ReplanOutcome.SUPERSEDED, ReplanOutcome.DEAD_LETTERED})


@dataclass(frozen=True, slots=True)
class Followed:
    submission_id: str
    submission: Submission | None
    operation: Operation | None
    replan: Replan | None = None
    """What became of the operation's CONFLICT, when it is one (None: not decided yet)."""

    @property
    def final(self) -> bool:
        if self.submission is not None and self.submission.dlq_id is not None:
            return True
        if self.operation is not None and self.operation.stage is Stage.CONFLICT:
            return self.replan is not None and self.replan.outcome in _NO_REPLAN_COMING
        return self.operation is not None and self.operation.stage in _FINAL

    @property
    def completed(self) -> bool:
        return self.operation is not None and self.operation.stage is Stage.COMPLETED

    @property
    def where(self) -> str:
        """Where it is, in a few words."""
        if self.submission is None:
            return "not planned yet"
        if self.submission.dlq_id is not None:
            return f"not planned: DLQ entry {self.submission.dlq_id}"
        if self.operation is None:
            return f"planned as {self.submission.operation_id}, not applied yet"
        where = f"{self.operation.operation_id} {self.operation.stage}"
        if self.operation.stage is not Stage.CONFLICT:
            return where
        if self.replan is None or self.replan.outcome is ReplanOutcome.REQUESTED:
            return f"{where}, to be replanned"
        if self.replan.outcome is ReplanOutcome.SUPERSEDED:
            return f"{where}, superseded by a newer submission of the document"
        if self.replan.outcome is ReplanOutcome.DEAD_LETTERED:
            return f"{where}, replans exhausted: DLQ entry {self.replan.dlq_id}"
        return f"{where}, replanned as {self.replan.replanned_as}"


def follow(
    store: OperationStore,
    submission_ids: Sequence[str],
    *,
    timeout_s: float,
    poll_s: float = 0.5,
    on_final: Callable[[Followed], object] = lambda followed: None,
) -> list[Followed]:
    """Poll until every submission is final or ``timeout_s`` has passed; return where each is, in
    the order given. ``on_final`` hears of each one as it becomes final."""
    deadline = time.monotonic() + timeout_s
    latest = {i: Followed(i, None, None) for i in submission_ids}  # the last look at each
    waiting = list(dict.fromkeys(submission_ids))
    while True:
        still = []
        for submission_id in waiting:
            followed = _look(store, submission_id)
            latest[submission_id] = followed
            if followed.final:
                on_final(followed)
            else:
                still.append(submission_id)
        waiting = still
        if not waiting or time.monotonic() >= deadline:
            return [latest[i] for i in submission_ids]
        time.sleep(poll_s)


def _look(store: OperationStore, submission_id: str) -> Followed:
    # Read afresh each time: a submission planned again (an aborted transaction) may have moved.
    submission = store.get_submission(submission_id)
    operation_id = submission.operation_id if submission else None
    operation = store.get_operation(operation_id) if operation_id else None
    conflict = operation is not None and operation.stage is Stage.CONFLICT
    replan = store.get_replan(operation.operation_id) if operation and conflict else None
    return Followed(submission_id, submission, operation, replan)


__all__ = ["Followed", "follow"]
