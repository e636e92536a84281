"""A failed request's planning DLQ entry: new by position, or its replayed entry extended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graph_ingest.consumers.planner.planning_dlq import PlanningFailure, planning_dlq_entry
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.dlq.entries import dlq_id_of_position, with_status
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def failure(
    offset: int, attempts: int, at: datetime, replay_of: str | None = None
) -> PlanningFailure:
    headers: tuple[tuple[str, bytes | None], ...] = (("submission_id", b"sub-1"),)
    if replay_of is not None:
        headers += ((kafka_headers.DLQ_REPLAY, replay_of.encode()),)
    message = RequestMessage("requests", 0, offset, b"kb/doc-a", b"request bytes", headers)
    error = PlanningError("schema 2027 unknown", code=StatusCode.FAILED_PRECONDITION)
    return PlanningFailure(message, error, attempts=attempts, at=at)


def test_a_first_failure_is_a_new_entry_named_by_its_position() -> None:
    entry = planning_dlq_entry(failure(7, attempts=3, at=T0), worker_id="w")
    assert entry.dlq_id == dlq_id_of_position("requests", 0, 7)
    envelope = decode_dlq_envelope(entry.envelope)
    assert [a.attempt for a in envelope.attempts] == [3]
    assert (envelope.folded_attempts, envelope.total_attempts) == (2, 3)


def test_a_replay_that_fails_again_extends_its_entry_where_it_came_from() -> None:
    # Given an entry replayed (REPLAYED) from the request at offset 7
    first = planning_dlq_entry(failure(7, attempts=1, at=T0), worker_id="w")
    replayed = with_status(first, DlqStatus.REPLAYED, "replayed by ops")
    later = T0 + timedelta(minutes=5)

    # When its replay (offset 12) fails after two attempts
    again = planning_dlq_entry(
        failure(12, attempts=2, at=later, replay_of=first.dlq_id),
        worker_id="w",
        earlier=replayed,
    )

    # Then it is the same entry, pending review, its history extended, its origin kept
    envelope = decode_dlq_envelope(again.envelope)
    assert again.dlq_id == first.dlq_id
    assert (envelope.status, envelope.note) == (DlqStatus.PENDING_REVIEW, None)
    assert [a.attempt for a in envelope.attempts] == [1, 3]
    assert (envelope.folded_attempts, again.attempts) == (1, 3)
    assert (envelope.original_offset, envelope.dead_lettered_at) == (7, later)
    assert (envelope.original_value, envelope.original_headers[0].key) == (
        b"request bytes",
        "submission_id",
    )


def test_a_replay_header_that_is_no_dlq_id_names_no_entry() -> None:
    # A NUL would make the entry lookup itself fail in PostgreSQL; anything else is no entry.
    for value in ("dlq-\x00", "dlq-1", "DLQ-0123456789ABCDEF01234567", "x" * 600):
        assert failure(7, attempts=1, at=T0, replay_of=value).replay_of is None
    named = dlq_id_of_position("requests", 0, 3)
    assert failure(7, attempts=1, at=T0, replay_of=named).replay_of == named
