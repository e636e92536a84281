"""The builders of ``schemas.messages`` and the re-submitted request: what each puts on the wire."""

from __future__ import annotations

from datetime import timedelta

import pytest

from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.domain.dlq import MAX_ATTEMPT_HISTORY
from graph_ingest.domain.ids import document_key
from graph_ingest.producers.replans import ReplanMark, replan_marks
from graph_ingest.schemas.codec import decode_degradation_event
from graph_ingest.schemas.messages import (
    OutboxMessage,
    degradation_message,
    dlq_envelope,
    dlq_message,
    message_size,
    outbox_message,
    retry_copy,
)
from graph_ingest.schemas.request_messages import resubmitted_request
from tests.unit.dlq_entries import entry_for
from tests.unit.dlq_envelopes import AT, attempt, envelope
from tests.unit.plans import plan_for

pytestmark = pytest.mark.timeout(30)

HEADERS = (
    ("operation_id", b"op-1"),
    ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"),
)


def test_document_key_is_space_slash_document_id() -> None:
    assert document_key("research", "doc-42") == "research/doc-42"


def test_dlq_envelope_keeps_the_message_as_it_was() -> None:
    # Given the fields of the test envelope, When built from them, Then the envelope is that one
    expected = envelope()
    built = dlq_envelope(
        ("ingestion.plans", 3, 12_847),
        b"research/doc-42",
        b"\xc3\x01 frozen plan bytes",
        HEADERS,
        expected.attempts,
        at=AT + timedelta(seconds=36),
        operation_id="op-1",
        fingerprint="v1:" + "ab" * 32,
    )
    assert built == expected


def test_dlq_envelope_folds_a_long_history_and_counts_the_uncounted() -> None:
    attempts = [attempt(n) for n in range(1, MAX_ATTEMPT_HISTORY + 4)]
    built = dlq_envelope(("ingest.requests", 0, 5), None, b"v", (), attempts, at=AT, uncounted=2)
    assert len(built.attempts) == MAX_ATTEMPT_HISTORY
    assert built.attempts[0] == attempts[0] and built.attempts[-1] == attempts[-1]
    assert built.folded_attempts == 2 + 3
    assert built.total_attempts == len(attempts) + 2


def test_retry_copy_stores_headers_as_text_and_leaves_off_what_is_not() -> None:
    copy = retry_copy(
        "ingestion.plans.retry.1",
        b"research/doc-42",
        b"plan",
        [("operation_id", b"op-1"), ("odd", b"\xff\xfe"), ("nul", b"a\x00b"), ("none", None)],
        operation_id="op-1",
    )
    assert copy == OutboxMessage(
        topic="ingestion.plans.retry.1",
        key=b"research/doc-42",
        value=b"plan",
        headers={"operation_id": "op-1", "nul": "a\\x00b"},
        operation_id="op-1",
    )


def test_message_size_counts_key_value_and_headers() -> None:
    message = OutboxMessage(topic="t", key=b"ab", value=b"cde", headers={"f": "gh"})
    assert message_size(message) == 2 + 3 + 1 + 2


def test_a_resubmitted_request_carries_its_own_headers_and_the_new_marks_only() -> None:
    sent_before = [
        ("submission_id", b"sub-1"),
        ("replan_of", b"op-old"),
        ("replan_attempt", b"1"),
        ("dlq_replay", b"dlq-000000000000000000000000"),
    ]
    message = resubmitted_request(
        "ingest.requests",
        b"research/doc-42",
        b"req",
        sent_before,
        replan_marks(ReplanMark("op-2", 2)),
    )
    assert message == OutboxMessage(
        topic="ingest.requests",
        key=b"research/doc-42",
        value=b"req",
        headers={"submission_id": "sub-1", "replan_of": "op-2", "replan_attempt": "2"},
    )


def test_an_outbox_row_becomes_its_message_with_the_operation_headers_from_its_columns() -> None:
    # Given an operation event's row: JSONB headers (one not a string), its columns
    message = outbox_message(
        "ingestion.operations", b"op-1", b"\x02event", {"stage": "APPLIED", "n": 3}, "op-1", 7
    )

    # Then the message carries the row's key, value and headers, the columns as headers too
    assert message == OutboxMessage(
        topic="ingestion.operations",
        key=b"op-1",
        value=b"\x02event",
        headers={"stage": "APPLIED", "n": "3", "operation_id": "op-1", "sequence": "7"},
        operation_id="op-1",
        sequence=7,
    )


def test_an_outbox_row_keeps_its_own_operation_headers() -> None:
    message = outbox_message(
        "t", None, b"v", {"operation_id": "op-own", "sequence": "1"}, "op-column", 9
    )

    assert message.headers == {"operation_id": "op-own", "sequence": "1"}
    assert message.key is None


def test_the_dlq_message_of_an_entry_is_its_newest_envelope_keyed_by_dlq_id() -> None:
    entry = entry_for(plan_for("doc-1"))

    message = dlq_message("ingestion.dlq", entry)

    assert message == OutboxMessage(
        topic="ingestion.dlq",
        key=entry.dlq_id.encode(),
        value=entry.envelope,
        headers={
            "dlq_id": entry.dlq_id,
            "dlq_status": entry.status.value,
            "error_code": entry.code.value,
        },
        operation_id=entry.operation_id,
    )


def test_a_degradation_event_is_keyed_by_its_worker_and_typed_avro() -> None:
    event = DegradationEvent(
        worker_id="applier-7",
        level=DegradationLevel.L2,
        previous_level=DegradationLevel.L1,
        reason="circuit breaker open: neo4j",
        at=AT,
    )

    message = degradation_message(event, "ingestion.degradation")

    assert message.topic == "ingestion.degradation"
    assert message.key == b"applier-7"
    assert message.headers == {
        "content-type": "application/vnd.graph-ingest.degradation-event+avro;v=1"
    }
    assert decode_degradation_event(message.value) == event
