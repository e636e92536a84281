"""Building ingest request messages: ids, headers, the size check — before anything is sent."""

from __future__ import annotations

import pytest

from graph_ingest.domain.trace import parse_traceparent
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_ingest_request
from graph_ingest.schemas.errors import RequestRefused
from graph_ingest.schemas.messages import message_size
from graph_ingest.schemas.request_messages import request_message, submission_id_of
from tests.unit.requests import candidates, request

pytestmark = pytest.mark.timeout(30)

TOPIC = "ingest.requests"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_message_is_keyed_by_document_and_carries_the_request() -> None:
    original = request("a/b.txt")

    message, submitted = request_message(original, TOPIC, max_bytes=100_000)

    assert (message.topic, message.key) == (TOPIC, b"unit/a/b.txt")
    assert decode_ingest_request(message.value) == original
    assert submitted.key == "unit/a/b.txt"
    assert message.headers[kafka_headers.SUBMISSION_ID] == submitted.submission_id


def test_the_submission_id_is_the_operation_id_when_the_request_has_one() -> None:
    assert submission_id_of(request(operation_id="op-7")) == "op-7"


def test_equal_requests_share_a_submission_id_and_any_difference_changes_it() -> None:
    first = submission_id_of(request())

    assert submission_id_of(request()) == first
    assert first.startswith("sub-")
    for changed in (
        request(document_version="v2"),
        request(content="Other text."),
        request(document_id="doc-2"),
        request(candidates=candidates()),
    ):
        assert submission_id_of(changed) != first


def test_a_given_traceparent_is_kept_and_names_the_trace() -> None:
    message, submitted = request_message(
        request(), TOPIC, max_bytes=100_000, traceparent=TRACEPARENT
    )

    assert message.headers[kafka_headers.TRACEPARENT] == TRACEPARENT
    assert submitted.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_without_a_traceparent_each_request_starts_a_trace_of_its_own() -> None:
    traces = {
        parse_traceparent(
            request_message(request(), TOPIC, max_bytes=100_000)[0].headers["traceparent"]
        ).trace_id
        for _ in range(5)
    }

    assert len(traces) == 5


def test_an_invalid_traceparent_is_refused() -> None:
    with pytest.raises(RequestRefused, match="unit/doc-1: not a traceparent"):
        request_message(request(), TOPIC, max_bytes=100_000, traceparent="00-nope")


def test_a_request_larger_than_the_topic_takes_is_refused_naming_the_way_out() -> None:
    huge = request(content="x" * 5_000)

    with pytest.raises(RequestRefused, match=r"unit/doc-1 is \d+ bytes; .* at most 4096") as caught:
        request_message(huge, TOPIC, max_bytes=4096)

    assert "content_ref" in str(caught.value)


def test_the_size_check_counts_key_value_and_headers() -> None:
    message, _ = request_message(request(), TOPIC, max_bytes=100_000)
    size = message_size(message)

    assert size > len(message.value) + len(message.key or b"")
    request_message(request(), TOPIC, max_bytes=size)  # exactly at the limit: accepted
    with pytest.raises(RequestRefused):
        request_message(request(), TOPIC, max_bytes=size - 1)


def test_an_integer_the_wire_cannot_carry_is_refused_naming_the_document() -> None:
    extraction = candidates()
    entity = extraction.entities[0].model_copy(update={"properties": {"big": 2**64}})
    poisoned = request(candidates=extraction.model_copy(update={"entities": (entity,)}))

    with pytest.raises(RequestRefused, match=r"unit/doc-1: .*does not fit in 64 bits"):
        request_message(poisoned, TOPIC, max_bytes=100_000)
