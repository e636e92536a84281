"""IngestProducer against the real Kafka: acknowledged, keyed, traced, nothing sent on refusal."""

from __future__ import annotations

import pytest

from graph_ingest.domain.trace import parse_traceparent
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_ingest_request
from graph_ingest.schemas.errors import RequestRefused
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.unit.requests import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_submitted_requests_are_on_the_topic_keyed_by_document_with_their_ids(
    pipeline: Pipeline,
) -> None:
    with IngestProducer(pipeline.settings) as producer:
        first = producer.submit(request("doc-1"), traceparent=TRACEPARENT)
        batch = producer.submit_many([request("doc-2"), request("doc-3", operation_id="op-3")])

    received = read_to_end(pipeline.settings, pipeline.settings.topics.requests)
    by_key = {key: (decode_ingest_request(value), headers) for key, value, headers in received}
    assert set(by_key) == {b"unit/doc-1", b"unit/doc-2", b"unit/doc-3"}
    ids = {
        key: headers[kafka_headers.SUBMISSION_ID].decode() for key, (_, headers) in by_key.items()
    }
    assert ids == {
        b"unit/doc-1": first,
        b"unit/doc-2": batch[0].submission_id,
        b"unit/doc-3": "op-3",
    }
    assert by_key[b"unit/doc-1"][0] == request("doc-1")
    assert by_key[b"unit/doc-1"][1][kafka_headers.TRACEPARENT].decode() == TRACEPARENT
    doc2_trace = parse_traceparent(by_key[b"unit/doc-2"][1][kafka_headers.TRACEPARENT].decode())
    assert doc2_trace.trace_id == batch[0].trace_id


def test_a_batch_with_one_oversized_request_sends_nothing(pipeline: Pipeline) -> None:
    settings = pipeline.settings.model_copy(
        update={"topics": pipeline.settings.topics.model_copy(update={"max_message_bytes": 4096})}
    )
    with IngestProducer(settings) as producer, pytest.raises(RequestRefused, match="doc-big"):
        producer.submit_many([request("doc-ok"), request("doc-big", content="x" * 10_000)])

    assert read_to_end(pipeline.settings, pipeline.settings.topics.requests) == []
