"""The DLQ envelope's domain rules: bytes kept as they are, a bounded and ordered history."""

import pytest
from pydantic import ValidationError

from graph_ingest.domain.dlq import (
    MAX_ATTEMPT_HISTORY,
    AttemptRecord,
    DlqEnvelope,
    DlqStatus,
    MessageHeader,
    append_attempt,
)
from graph_ingest.domain.limits import MAX_ERROR_MESSAGE_LENGTH
from graph_ingest.domain.status import StatusCode
from tests.unit.dlq_envelopes import AT, TRACE_ID, attempt, envelope, failure

pytestmark = pytest.mark.timeout(10)


def test_an_attempt_record_takes_what_the_error_detail_says() -> None:
    detail = failure("deadlock", StatusCode.ABORTED)

    record = AttemptRecord.of(detail, attempt=2, tier=0, at=AT)

    assert (record.attempt, record.tier, record.at) == (2, 0, AT)
    assert (record.code, record.error_class, record.message) == (
        StatusCode.ABORTED,
        "SerializationFailure",
        "deadlock",
    )
    assert (record.worker_id, record.code_version, record.trace_id) == (
        "applier-7",
        "0.1.0",
        TRACE_ID,
    )


def test_a_new_envelope_waits_for_review() -> None:
    made = envelope()

    assert made.status is DlqStatus.PENDING_REVIEW
    assert made.total_attempts == 4


def test_up_to_the_limit_nothing_is_folded() -> None:
    history: tuple[AttemptRecord, ...] = (attempt(1),)
    folded = 0
    for number in range(2, MAX_ATTEMPT_HISTORY + 1):
        history, folded = append_attempt(history, folded, attempt(number))

    assert [a.attempt for a in history] == list(range(1, MAX_ATTEMPT_HISTORY + 1))
    assert folded == 0


def test_past_the_limit_the_first_and_the_latest_are_kept_and_the_rest_counted() -> None:
    history: tuple[AttemptRecord, ...] = (attempt(1),)
    folded = 0
    for number in range(2, 51):
        history, folded = append_attempt(history, folded, attempt(number))

    assert len(history) == MAX_ATTEMPT_HISTORY
    assert [a.attempt for a in history] == [1, *range(51 - MAX_ATTEMPT_HISTORY + 1, 51)]
    assert folded == 50 - MAX_ATTEMPT_HISTORY
    assert len(history) + folded == 50


def test_a_small_limit_folds_the_same_way() -> None:
    history, folded = append_attempt((attempt(1), attempt(2)), 5, attempt(9), limit=2)

    assert [a.attempt for a in history] == [1, 9]
    assert folded == 6


def test_a_history_must_keep_room_for_the_first_and_the_latest() -> None:
    with pytest.raises(ValueError, match="limit 1"):
        append_attempt((attempt(1),), 0, attempt(2), limit=1)


def test_an_envelope_failing_again_extends_its_bounded_history() -> None:
    made = envelope()
    for number in range(5, 40):
        made = made.with_attempt(attempt(number))

    assert len(made.attempts) == MAX_ATTEMPT_HISTORY
    assert made.total_attempts == 39
    assert made.attempts[0].attempt == 1
    assert made.attempts[-1].attempt == 39


def test_attempt_numbers_must_increase() -> None:
    with pytest.raises(ValidationError, match="must increase"):
        envelope(attempts=(attempt(2), attempt(2)))
    with pytest.raises(ValidationError, match="must increase"):
        envelope().with_attempt(attempt(3))


def test_an_envelope_has_at_least_one_attempt_and_at_most_the_limit() -> None:
    with pytest.raises(ValidationError):
        envelope(attempts=())
    with pytest.raises(ValidationError):
        envelope(attempts=tuple(attempt(n) for n in range(1, MAX_ATTEMPT_HISTORY + 2)))


def test_an_attempt_message_past_the_bound_is_refused_unless_built_from_a_detail() -> None:
    huge = "x" * (MAX_ERROR_MESSAGE_LENGTH * 10)

    assert len(attempt(1, message=huge).message) == MAX_ERROR_MESSAGE_LENGTH
    with pytest.raises(ValidationError):
        AttemptRecord.model_validate({**attempt(1).model_dump(), "message": huge})


def test_raw_bytes_survive_json_as_base64() -> None:
    made = envelope(
        original_key=b"\x00\xff key",
        original_value=b"\xff\xfe\x00 not utf-8",
        original_headers=(
            MessageHeader(key="bin", value=b"\x80\x00"),
            MessageHeader(key="n", value=None),
        ),
    )

    assert DlqEnvelope.model_validate_json(made.model_dump_json()) == made
