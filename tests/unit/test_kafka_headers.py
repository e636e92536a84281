"""Kafka headers: one catalogue of names, typed retry headers, the trace id a message carries."""

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from graph_ingest.domain.limits import MAX_ERROR_MESSAGE_LENGTH
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import headers
from graph_ingest.schemas.errors import MalformedHeader
from graph_ingest.schemas.headers import (
    RETRY_HEADERS,
    RetryHeaders,
    header_id,
    header_text,
    header_value,
    trace_id_from_headers,
    with_retry_headers,
)

pytestmark = pytest.mark.timeout(10)

AT = datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{OTHER_TRACE_ID}-b7ad6b7169203331-01".encode()


def retry(**overrides: Any) -> RetryHeaders:
    fields: dict[str, Any] = {
        "attempt": 2,
        "due_at": AT + timedelta(seconds=1),
        "original_topic": "ingestion.plans",
        "original_partition": 3,
        "original_offset": 12_847,
        "first_failure_at": AT,
        "error_code": StatusCode.ABORTED,
        "error_class": "DeadlockDetected",
        "error_message": "deadlock detected — Zürich",
        "trace_id": TRACE_ID,
    }
    return RetryHeaders(**{**fields, **overrides})


def test_the_last_occurrence_of_a_repeated_header_wins() -> None:
    given = [("a", b"1"), ("b", b"x"), ("a", b"2")]

    assert header_value(given, "a") == b"2"
    assert header_value(given, "missing") is None
    assert header_value(None, "a") is None
    assert header_value([("a", None)], "a") is None


def test_header_text_refuses_what_is_not_utf8() -> None:
    assert header_text([("a", "é".encode())], "a") == "é"
    with pytest.raises(MalformedHeader, match="not UTF-8") as caught:
        header_text([("a", b"\xff\xfe")], "a")
    assert caught.value.code is StatusCode.INVALID_ARGUMENT


def test_retry_headers_round_trip_as_utf8_bytes() -> None:
    sent = retry()

    wire = sent.to_headers()

    assert [name for name, _ in wire] == list(RETRY_HEADERS)
    assert all(isinstance(value, bytes) for _, value in wire)
    assert dict(wire)[headers.RETRY_DUE_AT] == b"2026-03-01T12:30:46.123456Z"
    assert dict(wire)[headers.ERROR_CODE] == b"ABORTED"
    assert RetryHeaders.from_headers(wire) == sent


def test_retry_header_times_are_written_in_utc_and_read_as_the_same_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    sent = retry(due_at=datetime(2026, 3, 1, 14, 0, tzinfo=plus_two))

    read = RetryHeaders.from_headers(sent.to_headers())

    assert read is not None
    assert read.due_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert read.due_at.utcoffset() == timedelta(0)


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        retry(due_at=datetime(2026, 3, 1, 12, 0))


def test_a_message_without_retry_headers_is_no_retry_copy() -> None:
    assert RetryHeaders.from_headers([(headers.OPERATION_ID, b"op-1")]) is None
    assert RetryHeaders.from_headers(None) is None


def test_incomplete_retry_headers_name_what_is_missing() -> None:
    wire = [
        (n, v) for n, v in retry().to_headers() if n not in (headers.TRACE_ID, headers.ERROR_CODE)
    ]

    with pytest.raises(MalformedHeader, match="error_code, trace_id missing"):
        RetryHeaders.from_headers(wire)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (headers.RETRY_ATTEMPT, b"two"),
        (headers.RETRY_ATTEMPT, b"1"),
        (headers.RETRY_DUE_AT, b"tomorrow"),
        (headers.RETRY_DUE_AT, b"2026-03-01T12:00:00"),  # no time zone
        (headers.ORIGINAL_PARTITION, b"-1"),
        (headers.ERROR_CODE, b"TELEPORTED"),
        (headers.ERROR_MESSAGE, b"x" * (MAX_ERROR_MESSAGE_LENGTH + 1)),
        (headers.TRACE_ID, b"0" * 32),
        (headers.TRACE_ID, b"\xff"),
    ],
)
def test_invalid_retry_headers_are_malformed(name: str, value: bytes) -> None:
    wire = [*retry().to_headers(), (name, value)]

    with pytest.raises(MalformedHeader):
        RetryHeaders.from_headers(wire)


def test_the_next_copy_keeps_the_message_headers_and_replaces_the_retry_ones() -> None:
    original = [
        (headers.OPERATION_ID, b"op-1"),
        (headers.TRACEPARENT, TRACEPARENT),
        ("producer-binary", b"\x00\xff"),
        ("producer-null", None),
    ]
    first = with_retry_headers(original, retry())

    second = with_retry_headers(first, retry(attempt=3, error_code=StatusCode.INTERNAL))

    assert second[: len(original)] == original
    assert len(second) == len(original) + len(RETRY_HEADERS)
    read = RetryHeaders.from_headers(second)
    assert read is not None
    assert (read.attempt, read.error_code) == (3, StatusCode.INTERNAL)


def test_the_trace_id_comes_from_our_header_first_then_the_producer_traceparent() -> None:
    assert trace_id_from_headers([(headers.TRACEPARENT, TRACEPARENT)]) == OTHER_TRACE_ID
    assert (
        trace_id_from_headers(
            [(headers.TRACEPARENT, TRACEPARENT), (headers.TRACE_ID, TRACE_ID.encode())]
        )
        == TRACE_ID
    )


@pytest.mark.parametrize(
    "given",
    [
        None,
        [],
        [(headers.TRACEPARENT, b"garbage")],
        [(headers.TRACEPARENT, f"00-{'0' * 32}-b7ad6b7169203331-01".encode())],
        [(headers.TRACEPARENT, b"\xff\xfe")],
        [(headers.TRACEPARENT, None)],
        [(headers.TRACE_ID, b"not-a-trace-id")],
    ],
)
def test_no_valid_trace_id_means_none_so_the_caller_starts_a_trace(given: Any) -> None:
    assert trace_id_from_headers(given) is None


def test_an_invalid_trace_id_header_falls_back_to_the_traceparent() -> None:
    given = [(headers.TRACE_ID, b"0" * 32), (headers.TRACEPARENT, TRACEPARENT)]

    assert trace_id_from_headers(given) == OTHER_TRACE_ID


def test_an_id_header_is_the_id_postgresql_can_store() -> None:
    assert header_id([("submission_id", b"sub-1")], "submission_id") == "sub-1"
    assert header_id([], "submission_id") is None


@pytest.mark.parametrize("value", [b"sub-\x00", b"s" * 513, b"", b"\xff"])
def test_an_id_header_postgresql_cannot_store_is_malformed(value: bytes) -> None:
    with pytest.raises(MalformedHeader, match="header submission_id"):
        header_id([("submission_id", value)], "submission_id")
