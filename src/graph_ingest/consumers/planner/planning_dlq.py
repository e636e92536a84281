"""The planning DLQ entry of an ingest request: its coordinates, its bytes, and why.

Built by the planner worker for a request that cannot be planned, and for one whose plans kept
meeting CONFLICTs past ``PLANNER__MAX_REPLANS`` (``consumers.planner.conflicts``). The envelope keeps the
request's original topic (the requests topic), key, value and headers: ``dlq replay`` submits
them again.

A first-hand request's entry is named by its position. A replayed one (header ``dlq_replay``)
that fails again returns to the entry it was replayed from, as a replayed plan does
(``consumers.applier.routing``): PENDING_REVIEW again, its history extended with the new attempt, its
original coordinates kept — unless that entry was purged meanwhile: a purged (RESOLVED) entry
stays purged, and the failure is a new entry named by the replay's position, linked to the
purged one by the ``dlq_replay`` header among its original headers. The entry is read and
written in the caller's unit of work (its row locked), so an operator's purge or replay
meanwhile is not overwritten with a stale envelope.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graph_ingest import __version__
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.dlq.entries import dlq_id_of_position, entry_of
from graph_ingest.domain.dlq import AttemptRecord, DlqStatus
from graph_ingest.domain.error_detail import ErrorContext
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.resilience.classify import error_detail
from graph_ingest.resilience.policy import TO_DLQ, retry_advice
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.schemas.headers import trace_id_from_headers
from graph_ingest.schemas.messages import OutboxMessage, dlq_envelope, dlq_message
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.dlq_index import DlqEntry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PlanningFailure:
    """A request to dead-letter: why, after how many attempts (of this delivery), and when."""

    message: RequestMessage
    error: BaseException
    attempts: int
    at: datetime

    @property
    def replay_of(self) -> str | None:
        """The DLQ entry this request was replayed from (its ``dlq_replay`` header), or None."""
        return self.message.replay_of


@dataclass(frozen=True, slots=True)
class DeadLettered:
    entries: tuple[DlqEntry, ...]
    """The entry of each failure, in their order (two may be one entry, replayed twice)."""
    messages: tuple[OutboxMessage, ...]
    """The DLQ-topic messages of the entries written, to publish after the unit of work."""


def dead_letter_requests(
    uow: UnitOfWork, failures: Sequence[PlanningFailure], *, worker_id: str, dlq_topic: str
) -> DeadLettered:
    """Write the planning DLQ entries of ``failures`` in ``uow``: a replayed request's extends
    the planning entry it was replayed from, when that exists; any other's is new."""
    replayed = [f.replay_of for f in failures if f.replay_of is not None]
    current = uow.dlq_entries(replayed)
    entries = []
    for failure in failures:
        earlier = _returned_to(failure, current)
        entry = planning_dlq_entry(failure, worker_id=worker_id, earlier=earlier)
        if earlier is not None:
            current[entry.dlq_id] = entry  # a second failure in the batch extends this one
        entries.append(entry)
    written = list({entry.dlq_id: entry for entry in entries}.values())
    uow.put_dlq_entries(written)
    return DeadLettered(tuple(entries), tuple(dlq_message(dlq_topic, e) for e in written))


def _returned_to(failure: PlanningFailure, current: dict[str, DlqEntry]) -> DlqEntry | None:
    """The entry a failed request returns to: the planning entry it was replayed from, unless
    that one is a plan's (not a request's to return to) or was purged (it stays purged)."""
    earlier = current.get(failure.replay_of) if failure.replay_of is not None else None
    if earlier is None or earlier.original_topic != failure.message.topic:
        return None
    return None if earlier.status is DlqStatus.RESOLVED else earlier


def planning_dlq_entry(
    failure: PlanningFailure, *, worker_id: str, earlier: DlqEntry | None = None
) -> DlqEntry:
    """The entry of a failed request: ``earlier`` (the planning entry it was replayed from)
    extended with this attempt, or without it a new entry named by the request's position."""
    message = failure.message
    detail = error_detail(
        failure.error,
        trace_id=trace_id_from_headers(message.headers) or new_trace_id(),
        context=ErrorContext(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            worker_id=worker_id,
            code_version=__version__,
        ),
        retry=retry_advice(TO_DLQ, ()),
    )
    # The last failure of this delivery is kept; the retried ones before it are counted.
    retried = failure.attempts - 1
    if earlier is None:
        envelope = dlq_envelope(
            message.position,
            message.key,
            message.value,
            message.headers,
            [AttemptRecord.of(detail, attempt=failure.attempts, tier=None, at=failure.at)],
            at=failure.at,
            uncounted=retried,
        )
        entry = entry_of(dlq_id_of_position(*message.position), envelope)
    else:
        previous = decode_dlq_envelope(earlier.envelope)
        record = AttemptRecord.of(
            detail,
            attempt=previous.attempts[-1].attempt + failure.attempts,
            tier=None,
            at=failure.at,
        )
        entry = entry_of(earlier.dlq_id, previous.failed_again(record, uncounted=retried))
    log.error(
        "%s not planned after %d attempt(s): %s %s; planning DLQ entry %s%s",
        message.context(),
        failure.attempts,
        detail.code,
        detail.message,
        entry.dlq_id,
        _origin(failure, earlier),
    )
    return entry


def _origin(failure: PlanningFailure, earlier: DlqEntry | None) -> str:
    if earlier is not None:
        return " (replayed from it: failed again)"
    if failure.replay_of is not None:
        return f" (a new entry: replayed from {failure.replay_of}, which is not reopened)"
    return ""


__all__ = ["DeadLettered", "PlanningFailure", "dead_letter_requests", "planning_dlq_entry"]
