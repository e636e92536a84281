"""What ``graph-ingest status`` (and an API) shows of one id, as typed values: an operation (its
projected status with its plan, routed failures, replans, the leaders it waits behind and the
submission it was asked by), or a submission and its whole path through replans (its first
operation, then each replan's).

The status comes from the read service (``projections.queries``), current or said to be stale:
its plan kind, submission, every step with the error it recorded, and the outages it waited out.
What the projection does not carry comes from the write side's reader ports: the frozen plan's
base (and its kind, for an operation folded from operation.v1 events), the failure log, and the
planner's submission and replan records. A submission's path stays the planner's replan chain:
it names the replans the projection has not folded yet, which the read table cannot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.operation import ErrorInfo, OutageWait
from graph_ingest.domain.plan import IngestionPlan, PlanKind
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus, Transition, recorded_errors
from graph_ingest.store.failures import FailureAttempt
from graph_ingest.store.submissions import Replan, Submission

if TYPE_CHECKING:  # the CLI imports the views' types at start-up: no database driver for --help
    from graph_ingest.projections.queries import OperationQueries
    from graph_ingest.store.base import OperationStore


MAX_PARKED_CHAIN = 10
"""How many leaders ``status`` follows behind a parked operation (each its own read): enough for
any real queue of versions, and bounded however the rows point."""


@dataclass(frozen=True, slots=True)
class ChainLink:
    operation_id: str
    status: OperationStatus | None
    """None: the read table has no such operation (yet)."""


def parked_chain(
    first: str | None,
    lookup: Callable[[str], OperationStatus | None],
    limit: int = MAX_PARKED_CHAIN,
) -> list[ChainLink]:
    """What an operation waits behind: ``first``, what that one waits behind, and so on, until
    one waits behind nothing, is unknown, comes round again, or ``limit`` links are read."""
    chain: list[ChainLink] = []
    operation_id = first
    seen: set[str] = set()
    while operation_id is not None and operation_id not in seen and len(chain) < limit:
        seen.add(operation_id)
        status = lookup(operation_id)
        chain.append(ChainLink(operation_id, status))
        operation_id = status.parked_behind if status else None
    return chain


class NotProjectedYet(GraphIngestError):
    """The write side has the operation, the projection has not folded it (yet)."""

    code = StatusCode.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class Step:
    """One transition as shown: the step, and the error it recorded (None: it recorded none; a
    step carries its operation's last error on, which is not its own failure)."""

    transition: Transition
    error: ErrorInfo | None


@dataclass(frozen=True, slots=True)
class WaitedOut:
    """An outage the applier waited out in place with the operation's plan held, and how long."""

    dependency: str
    started_at: datetime
    ended_at: datetime
    seconds: float

    @classmethod
    def of(cls, wait: OutageWait) -> WaitedOut:
        seconds = (wait.ended_at - wait.started_at).total_seconds()
        return cls(wait.dependency, wait.started_at, wait.ended_at, round(seconds, 3))


@dataclass(frozen=True, slots=True)
class OperationView:
    status: OperationStatus
    current: bool
    """False: the write side has committed a newer sequence than the projection has seen."""
    committed_sequence: int | None
    plan_kind: PlanKind | None
    """None when the frozen plan is missing or unreadable (the status still says where it is)."""
    base_operation_id: str | None
    failures: tuple[FailureAttempt, ...]
    """Every failure routed to a retry tier or the DLQ, oldest first."""
    replan: Replan | None
    """What became of its CONFLICT (None: it had none, or it is not decided yet)."""
    replan_of: Replan | None
    """The replan that planned it (None: its request was planned first hand)."""
    submission: Submission | None
    """The submission its request was (last) planned from, with its extraction issues."""
    parked_chain: tuple[str, ...] = ()
    """While it waits behind a leader: that leader, the one it waits behind, and so on (at most
    ``MAX_PARKED_CHAIN``)."""

    @property
    def submission_id(self) -> str | None:
        """The submission it was asked by: its events' (operation.v2), else the planner's record."""
        if self.status.submission_id is not None:
            return self.status.submission_id
        return self.submission.submission_id if self.submission else None

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every transition in sequence order, each with the error it recorded."""
        transitions = self.status.transitions
        recorded = recorded_errors(transitions)
        return tuple(Step(t, e) for t, e in zip(transitions, recorded, strict=True))

    @property
    def waited(self) -> tuple[WaitedOut, ...]:
        return tuple(WaitedOut.of(wait) for wait in self.status.waits)


@dataclass(frozen=True, slots=True)
class SubmissionView:
    submission: Submission
    path: tuple[OperationView, ...]
    """Its operations in the order they were planned, those the projection has seen."""
    unseen: tuple[str, ...]
    """Operations of its path the projection has not seen yet (planned, not folded)."""


class StatusViews:
    """Builds the views from the read service and the write side's readers (both started)."""

    def __init__(self, queries: OperationQueries, store: OperationStore) -> None:
        self.queries = queries
        self._store = store

    def operation(self, operation_id: str, *, wait_s: float = 0.0) -> OperationView | None:
        """The operation's view, waiting up to ``wait_s`` for the projection to have seen its
        newest sequence; None when neither side knows it. Raises ``NotProjectedYet`` when only
        the write side does."""
        seen = self.queries.wait_until_projected(operation_id, wait_s)
        if seen.status is None:
            if seen.committed_sequence is None:
                return None
            raise NotProjectedYet(
                f"operation {operation_id} is committed (sequence {seen.committed_sequence}) but "
                "the projection has not folded it yet: is `graph-ingest worker projector` "
                "running? See `graph-ingest projections status`; `status --wait` waits for it"
            )
        with self._store.unit_of_work() as uow:
            failures = tuple(uow.failure_history(operation_id))
        plan = _frozen_plan(self._store.get_plan_bytes(operation_id))
        return OperationView(
            status=seen.status,
            current=seen.current,
            committed_sequence=seen.committed_sequence,
            plan_kind=seen.status.plan_kind or (plan.kind if plan else None),
            base_operation_id=plan.base_operation_id if plan else None,
            failures=failures,
            replan=self._store.get_replan(operation_id),
            replan_of=self._store.replan_making(operation_id),
            submission=self._store.submission_of_operation(operation_id),
            parked_chain=self.parked_chain(seen.status),
        )

    def parked_chain(self, status: OperationStatus) -> tuple[str, ...]:
        """The leaders ``status`` waits behind, nearest first, as the read table holds them."""
        links = parked_chain(status.parked_behind, self.queries.operation_status)
        return tuple(link.operation_id for link in links)

    def submission(self, submission_id: str, *, wait_s: float = 0.0) -> SubmissionView | None:
        """The submission and each operation of its path (``wait_s`` shared among them); None
        when the planner has recorded no such submission."""
        submission = self._store.get_submission(submission_id)
        if submission is None:
            return None
        operation_ids = self.replan_path(submission.operation_id)
        self.queries.wait_until_all_projected(operation_ids, wait_s)
        path: list[OperationView] = []
        unseen: list[str] = []
        for operation_id in operation_ids:
            try:
                view = self.operation(operation_id)
            except NotProjectedYet:
                view = None
            if view is None:
                unseen.append(operation_id)
            else:
                path.append(view)
        return SubmissionView(submission, tuple(path), tuple(unseen))

    def replan_path(self, last: str | None) -> list[str]:
        """The operations that led to ``last``, first planned first: each one's CONFLICT was
        replanned as the next."""
        path: list[str] = []
        operation_id = last
        while operation_id is not None and operation_id not in path:
            path.insert(0, operation_id)
            made_by = self._store.replan_making(operation_id)
            operation_id = made_by.operation_id if made_by else None
        return path


def _frozen_plan(data: bytes | None) -> IngestionPlan | None:
    from graph_ingest.schemas.codec import DecodeError, decode_plan

    if data is None:
        return None
    try:
        return decode_plan(data)
    except DecodeError:
        return None


__all__ = [
    "MAX_PARKED_CHAIN",
    "ChainLink",
    "NotProjectedYet",
    "OperationView",
    "StatusViews",
    "Step",
    "SubmissionView",
    "WaitedOut",
    "parked_chain",
]
