"""What each ingest request became in a planner batch (:class:`Handled`), and what the batch
writes of it: the plan message (with its submission id and a child of the request's
``traceparent``), the ``ingest_submissions`` rows, and the outcome per position the planner's
hooks report. Pure: the worker (``consumers.planner.worker``) does the Kafka and PostgreSQL I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from graph_ingest.consumers.planner.planning_dlq import PlanningFailure
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.trace import TraceParent, new_trace_id
from graph_ingest.kafka.records import Partition, Position
from graph_ingest.planning.request_planner import PlannedRequest
from graph_ingest.producers.replans import ConflictAction, ReplanMark
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.schemas.headers import trace_id_from_headers
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.schemas.plan_messages import sized_plan_message
from graph_ingest.schemas.request_messages import submission_id_of
from graph_ingest.settings.kafka import TopicSettings
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission, submission_issues

log = logging.getLogger(__name__)


PLANNED = "PLANNED"
DEAD_LETTERED = "DEAD_LETTERED"
DROPPED = "DROPPED"


@dataclass(frozen=True, slots=True)
class Handled:
    """What one request became in this batch: a plan (maybe claim-checked), a failure (its DLQ
    entry is written when the batch is), or nothing (a replan that a newer request superseded,
    or a second copy of one)."""

    message: RequestMessage
    outgoing: OutboxMessage | None
    claim: PlanClaim | None = None
    failure: PlanningFailure | None = None
    plan: IngestionPlan | None = None
    replan: Replan | None = None
    issues: tuple[ExtractionIssue, ...] = ()
    """The extraction issues of the plan, recorded with the submission."""

    @property
    def outcome(self) -> str:
        if self.plan is not None:
            return PLANNED
        return DEAD_LETTERED if self.failure is not None else DROPPED


def request_submission_id(message: RequestMessage) -> str | None:
    """The producer's submission id; derived as the producer derives it when it sent none."""
    if message.submission_id is not None:
        return message.submission_id
    return None if message.request is None else submission_id_of(message.request)


def handled_plan(
    message: RequestMessage, planned: PlannedRequest, topics: TopicSettings
) -> Handled:
    """A planned request: its plan message for ``topics.plans`` (claim-checked if too large)."""
    plan = planned.plan
    trace_id = trace_id_from_headers(message.headers) or new_trace_id()
    headers = {
        kafka_headers.SUBMISSION_ID: request_submission_id(message) or plan.operation_id,
        kafka_headers.TRACEPARENT: TraceParent.new(trace_id).header_value(),
    }
    outgoing, claim = sized_plan_message(
        plan,
        topics.plans,
        value=encode_plan(plan),
        max_bytes=topics.max_message_bytes,
        headers=headers,
    )
    return Handled(message, outgoing, claim=claim, plan=plan, issues=planned.issues)


def replan_dropped(
    message: RequestMessage, mark: ReplanMark, action: ConflictAction, *, at: datetime
) -> Handled:
    """A re-submitted request not planned (a newer request superseded it, or it is a second copy
    of a replan): nothing is sent; a superseded one records that with its submission."""
    log.info("%s replan %d of op=%s: %s", message.context(), mark.attempt, mark.replan_of, action)
    submission_id = request_submission_id(message)
    if action is not ConflictAction.SUPERSEDED or submission_id is None:
        return Handled(message, None)
    superseded = Replan(
        operation_id=mark.replan_of,
        submission_id=submission_id,
        attempt=mark.attempt,
        outcome=ReplanOutcome.SUPERSEDED,
        at=at,
    )
    return Handled(message, None, replan=superseded)


def next_offsets(handled: Sequence[Handled]) -> dict[Partition, int]:
    """Per partition, the offset after the last request handled: what the batch commits."""
    offsets: dict[Partition, int] = {}
    for item in handled:
        partition = (item.message.topic, item.message.partition)
        offsets[partition] = max(offsets.get(partition, 0), item.message.offset + 1)
    return offsets


def submissions(
    handled: Sequence[Handled], entries: Mapping[Position, DlqEntry], at: datetime
) -> list[Submission]:
    """What each submission became (``entries``: the DLQ entries of the failed requests, by
    position); a request that did not decode says which document it was for only through its
    key (the DLQ entry's), if at all."""
    recorded = []
    for item in handled:
        submitted_as = request_submission_id(item.message)
        key = item.message.document
        dlq = entries.get(item.message.position)
        if key is None and dlq is not None and dlq.space and dlq.document_id:
            key = (dlq.space, dlq.document_id)
        if submitted_as is None or key is None or (item.plan is None and dlq is None):
            continue
        recorded.append(
            Submission(
                submission_id=submitted_as,
                space=key[0],
                document_id=key[1],
                operation_id=item.plan.operation_id if item.plan else None,
                dlq_id=dlq.dlq_id if dlq else None,
                trace_id=trace_id_from_headers(item.message.headers),
                source=item.message.position,
                planned_at=at,
                issues=submission_issues(item.issues),
                issue_count=len(item.issues),
            )
        )
    return recorded


__all__ = [
    "DEAD_LETTERED",
    "DROPPED",
    "PLANNED",
    "Handled",
    "handled_plan",
    "next_offsets",
    "replan_dropped",
    "request_submission_id",
    "submissions",
]
