"""Replanning after a CONFLICT, decided without I/O.

A plan meets a CONFLICT when its document moved past the plan's expected revision before it
applied: another planner planned a version on the committed state while this one's was in flight
(a rebalance between planners). Nothing a frozen plan can do fixes that; planning the document's
newest request again, on the committed state, does. The planner worker does it
(``consumers.planner.conflicts``): it re-submits that request to the requests topic with the headers
``replan_of: <conflicted operation>`` and ``replan_attempt: <n>``, at most
``PLANNER__MAX_REPLANS`` times per submission, then makes it a planning DLQ entry.

Only the newest request of a document is replanned: when a newer one has been planned meanwhile,
that one is what the document becomes (it applies, or conflicts and is replanned itself).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.limits import MAX_ID_LENGTH
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.headers import Headers
from graph_ingest.store.submissions import Submission


@dataclass(frozen=True, slots=True)
class ReplanMark:
    """What the headers of a re-submitted request say: which CONFLICT, which attempt."""

    replan_of: str
    attempt: int


# An attempt number ingest_replans can hold (an INT): 1 to 999,999,999, ASCII digits only.
_ATTEMPT = re.compile(r"[1-9][0-9]{0,8}")


def replan_mark(headers: Headers) -> ReplanMark | None:
    """The replan a request message is, or None for a first-hand request (or headers that do not
    say it properly, or say it with values PostgreSQL could not record: such a request is planned
    as any other)."""
    try:
        replan_of = kafka_headers.header_id(headers, kafka_headers.REPLAN_OF)
        attempt = kafka_headers.header_text(headers, kafka_headers.REPLAN_ATTEMPT)
    except GraphIngestError:
        return None
    if replan_of is None or attempt is None or not _ATTEMPT.fullmatch(attempt):
        return None
    return ReplanMark(replan_of, int(attempt))


def replan_marks(mark: ReplanMark) -> dict[str, str]:
    """The headers that make a re-submitted request a replan."""
    return {
        kafka_headers.REPLAN_OF: mark.replan_of,
        kafka_headers.REPLAN_ATTEMPT: str(mark.attempt),
    }


def replan_operation_id(operation_id: str, attempt: int) -> str:
    """The operation id a replan of a request that names its own ``operation_id`` plans as: the
    same id would be bound to the conflicted plan (another expected revision), so it is derived,
    the same for every planner."""
    suffix = f"~replan{attempt}"
    if len(operation_id) + len(suffix) <= MAX_ID_LENGTH:
        return operation_id + suffix
    return "op_" + hashlib.sha256(operation_id.encode("utf-8")).hexdigest()[:32] + suffix


class ConflictAction(StrEnum):
    IGNORE = "ignore"
    """No planner planned the operation (a plan published by hand): nothing to replan."""
    SUPERSEDED = "superseded"
    """A newer request of the document has been planned: it is what the document becomes."""
    DUPLICATE = "duplicate"
    """The CONFLICT (or the replan) was handled already: this is a second copy of it."""
    REPLAN = "replan"
    DEAD_LETTER = "dead-letter"
    """Replanned ``max_replans`` times already."""


def on_conflict(
    operation_id: str,
    submission: Submission | None,
    newest: Submission | None,
    *,
    attempt: int,
    max_replans: int,
) -> ConflictAction:
    """What to do about the CONFLICT of ``operation_id``, planned from ``submission`` (None if no
    planner planned it), the newest submission of its document being ``newest``; ``attempt`` is
    the replan this would be (1 for the first)."""
    if submission is None:
        return ConflictAction.IGNORE
    if newest is None or newest.submission_id != submission.submission_id:
        return ConflictAction.SUPERSEDED
    if newest.operation_id != operation_id:
        return ConflictAction.DUPLICATE  # replanned already: the CONFLICT is seen twice
    if attempt > max_replans:
        return ConflictAction.DEAD_LETTER
    return ConflictAction.REPLAN


def replan_standing(
    mark: ReplanMark, submission_id: str | None, newest: Submission | None, planned_as: str | None
) -> ConflictAction:
    """REPLAN if a re-submitted request, planned as ``planned_as``, is still the document's replan:
    its submission is still the newest of the document, and still bound to the conflicted
    operation — or to this very plan (an earlier attempt to publish it was aborted). SUPERSEDED
    when a newer request of the document came first; DUPLICATE for a second copy of a replan that
    has been made. Before planning (``planned_as`` None) only SUPERSEDED is decided: the request is
    planned unless a newer one came first."""
    if newest is None or submission_id is None or newest.submission_id != submission_id:
        return ConflictAction.SUPERSEDED
    if planned_as is None or newest.operation_id in (mark.replan_of, planned_as):
        return ConflictAction.REPLAN
    return ConflictAction.DUPLICATE


__all__ = [
    "ConflictAction",
    "ReplanMark",
    "on_conflict",
    "replan_mark",
    "replan_marks",
    "replan_operation_id",
    "replan_standing",
]
