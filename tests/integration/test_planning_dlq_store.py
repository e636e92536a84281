"""Planning DLQ entries written by ``dead_letter_requests`` in a real PostgreSQL unit of work, with
the operator's replay and purge in between (issue 16 item 17)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.consumers.planner.planning_dlq import PlanningFailure, dead_letter_requests
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.dlq.entries import dlq_id_of_position
from graph_ingest.dlq.purge import purge
from graph_ingest.dlq.status import set_status
from graph_ingest.domain.dlq import DlqStatus, MessageHeader
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.postgres.store import PostgresOperationStore
from tests.integration.test_postgres_store import pg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
__all__ = ["pg", "store"]  # the fixtures of test_postgres_store: a schema of each test's own

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
REQUESTS = "ingest.requests"
DLQ_TOPIC = "ingestion.plans.dlq"


def fail(
    store: PostgresOperationStore, offset: int, at: datetime, replay_of: str | None = None
) -> tuple[DlqEntry, tuple[OutboxMessage, ...]]:
    """The request at ``offset`` (a replay of ``replay_of``) failed planning: its entry written."""
    headers: tuple[tuple[str, bytes | None], ...] = ((kafka_headers.SUBMISSION_ID, b"sub-1"),)
    if replay_of is not None:
        headers += ((kafka_headers.DLQ_REPLAY, replay_of.encode()),)
    message = RequestMessage(REQUESTS, 0, offset, b"kb/doc-a", b"request bytes", headers)
    error = PlanningError("schema 2027 unknown", code=StatusCode.FAILED_PRECONDITION)
    with store.unit_of_work() as uow:
        dead = dead_letter_requests(
            uow,
            [PlanningFailure(message, error, attempts=1, at=at)],
            worker_id="w",
            dlq_topic=DLQ_TOPIC,
        )
    return dead.entries[0], dead.messages


def test_a_purged_entry_stays_purged_when_its_replay_fails_and_the_failure_is_a_new_linked_entry(
    store: PostgresOperationStore,
) -> None:
    # Given a request's entry, replayed, then purged by an operator before the replay was planned
    first, _ = fail(store, 7, T0)
    set_status(store, DLQ_TOPIC, first.dlq_id, DlqStatus.REPLAYED, "replayed by ops")
    purged = purge(store, DLQ_TOPIC, first.dlq_id, "document withdrawn upstream").entry

    # When the replayed request (offset 12) fails again
    again, messages = fail(store, 12, T0 + timedelta(minutes=5), replay_of=first.dlq_id)

    # Then the purged entry is untouched: RESOLVED, with its reason and its one attempt
    assert store.get_dlq_entry(first.dlq_id) == purged
    assert decode_dlq_envelope(purged.envelope).note == "document withdrawn upstream"
    # and the failure is a new entry, pending review, named by the replay's position
    assert again.dlq_id == dlq_id_of_position(REQUESTS, 0, 12) != first.dlq_id
    assert store.get_dlq_entry(again.dlq_id) == again
    assert again.status is DlqStatus.PENDING_REVIEW
    envelope = decode_dlq_envelope(again.envelope)
    assert (envelope.original_offset, envelope.total_attempts) == (12, 1)
    # linked to the purged one by the header that says which entry it was replayed from
    link = MessageHeader(key=kafka_headers.DLQ_REPLAY, value=first.dlq_id.encode())
    assert link in envelope.original_headers
    # and only the new entry's envelope goes to the DLQ topic
    assert [m.key for m in messages] == [again.dlq_id.encode()]
