"""The planner's records port: what became of each ingest request (submission) and conflict (replan).

The planner writes them as it plans; ``follow`` and ``operations status`` read them to tell a
person where a document's request went.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from graph_ingest.domain.limits import bounded_text

MAX_SUBMISSION_ISSUES = 20
"""A submission keeps its first this many extraction issues; the rest are only counted."""


MAX_ISSUE_MESSAGE_LENGTH = 300
"""An issue's message is cut there (marked), like an error message."""


@dataclass(frozen=True, slots=True)
class SubmissionIssue:
    """An extraction issue recorded with its submission: what the message says, never more of
    the document or of the model's output."""

    code: str
    message: str
    chunk_id: str | None = None


class Issue(Protocol):
    """What an issue says (the planner's ExtractionIssue is one)."""

    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def chunk_id(self) -> str | None: ...


def submission_issues(issues: Sequence[Issue]) -> tuple[SubmissionIssue, ...]:
    """``issues`` as a submission keeps them: the first MAX_SUBMISSION_ISSUES, messages cut at
    MAX_ISSUE_MESSAGE_LENGTH."""
    return tuple(
        SubmissionIssue(i.code, bounded_text(i.message, MAX_ISSUE_MESSAGE_LENGTH), i.chunk_id)
        for i in issues[:MAX_SUBMISSION_ISSUES]
    )


@dataclass(frozen=True, slots=True)
class Submission:
    """What the planner made of one ingest request: its plan's operation, or its DLQ entry."""

    submission_id: str
    space: str
    document_id: str
    operation_id: str | None
    dlq_id: str | None
    trace_id: str | None
    source: tuple[str, int, int]
    """(topic, partition, offset) of the request."""
    planned_at: datetime
    issues: tuple[SubmissionIssue, ...] = ()
    """The extraction issues its plan was made with (``submission_issues``: bounded)."""
    issue_count: int = 0
    """How many issues planning recorded: past MAX_SUBMISSION_ISSUES, more than ``issues``."""


class ReplanOutcome(StrEnum):
    REQUESTED = "REQUESTED"
    """The newest request of the document was submitted again to be planned afresh."""
    REPLANNED = "REPLANNED"
    """It was planned on the committed state, as ``replanned_as``."""
    SUPERSEDED = "SUPERSEDED"
    """A newer request of the document came first: that one is what the document becomes."""
    DEAD_LETTERED = "DEAD_LETTERED"
    """It conflicted once more after ``PLANNER__MAX_REPLANS`` replans: a planning DLQ entry."""


@dataclass(frozen=True, slots=True)
class Replan:
    """What became of the CONFLICT of operation ``operation_id`` (a planned request's)."""

    operation_id: str
    submission_id: str
    attempt: int
    """1 for the first replan of a submission; the operation a replan made carries it on."""
    outcome: ReplanOutcome
    at: datetime
    replanned_as: str | None = None
    dlq_id: str | None = None


class PlannerRecordWriter(Protocol):
    """The planner's records, written inside a unit of work."""

    def record_submissions(self, submissions: Sequence[Submission]) -> None:
        """Insert or replace what the planner made of each submission."""

    def record_replans(self, replans: Sequence[Replan]) -> None:
        """Insert or replace what became of each CONFLICT; a REQUESTED replan never replaces a
        row (the same CONFLICT seen twice), a SUPERSEDED one only a REQUESTED one."""


class PlannerRecordReader(Protocol):
    """The planner's records read outside a unit of work (each call its own short read)."""

    def get_submission(self, submission_id: str) -> Submission | None: ...

    def submission_of_operation(self, operation_id: str) -> Submission | None:
        """The submission whose request was (last) planned as ``operation_id``."""
        ...

    def newest_submission(self, space: str, document_id: str) -> Submission | None:
        """The document's submission recorded last (the highest request offset)."""
        ...

    def get_replan(self, operation_id: str) -> Replan | None:
        """What became of the CONFLICT of ``operation_id``; None if it had none (yet)."""
        ...

    def replan_making(self, operation_id: str) -> Replan | None:
        """The replan that planned ``operation_id``; None when its request was planned first
        hand."""
        ...


__all__ = [
    "MAX_ISSUE_MESSAGE_LENGTH",
    "MAX_SUBMISSION_ISSUES",
    "Issue",
    "PlannerRecordReader",
    "PlannerRecordWriter",
    "Replan",
    "ReplanOutcome",
    "Submission",
    "SubmissionIssue",
    "submission_issues",
]
