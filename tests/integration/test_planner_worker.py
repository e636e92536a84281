"""The planner worker on the real services: requests in, exactly one committed plan out each,
failures retried or recorded as planning DLQ entries, offsets committed with the plans."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Producer

from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import parse_traceparent
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.schemas.request_messages import request_message
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.submissions import Submission
from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.planners import build
from tests.unit.requests import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def submit(pipeline: Pipeline, *requests: Any, traceparent: str | None = None) -> list[str]:
    with IngestProducer(pipeline.settings) as producer:
        return [producer.submit(r, traceparent=traceparent) for r in requests]


def wait_submission(pipeline: Pipeline, submission_id: str, timeout_s: float = 60) -> Submission:
    return wait_until(
        lambda: pipeline.store.get_submission(submission_id),
        timeout_s=timeout_s,
        what=f"submission {submission_id} to be planned",
    )


def plans_on_topic(pipeline: Pipeline) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    """The committed plan messages (read_committed)."""
    return read_to_end(pipeline.settings, pipeline.settings.topics.plans)


def test_requests_become_one_plan_each_that_applies_with_the_trace_of_the_request(
    pipeline: Pipeline,
) -> None:
    planner = build(pipeline.settings)
    pipeline.start_planner(planner)
    pipeline.start_applier()
    # Given three requests, two of them versions of one document
    ids = submit(
        pipeline,
        request("doc-1", content="Alice met Bob."),
        request("doc-2", content="Carol met Dave."),
        traceparent=TRACEPARENT,
    )
    ids += submit(pipeline, request("doc-1", document_version="v2", content="Alice met Erin."))

    # Then each is planned, in order per document, and applies
    submissions = [wait_submission(pipeline, i) for i in ids]
    for submission in submissions:
        assert submission.operation_id is not None
        pipeline.wait_stage(submission.operation_id, Stage.COMPLETED)
    state = pipeline.store.get_document_state("unit", "doc-1")
    assert state is not None and state.revision == 2
    assert state.operation_id == submissions[2].operation_id

    # and the plans topic holds exactly one committed plan per request
    plans = plans_on_topic(pipeline)
    assert sorted(decode_plan(value).operation_id for _, value, _ in plans) == sorted(
        s.operation_id for s in submissions if s.operation_id
    )
    by_op = {decode_plan(value).operation_id: headers for _, value, headers in plans}
    first = by_op[submissions[0].operation_id]  # type: ignore[index]
    assert first[kafka_headers.SUBMISSION_ID].decode() == ids[0]
    trace = parse_traceparent(first[kafka_headers.TRACEPARENT].decode())
    assert trace.trace_id == parse_traceparent(TRACEPARENT).trace_id
    assert submissions[0].trace_id == trace.trace_id
    assert planner.calls["unit/doc-1"] == 2


def test_a_permanent_failure_and_an_undecodable_request_become_planning_dlq_entries(
    pipeline: Pipeline,
) -> None:
    planner = build(pipeline.settings)
    pipeline.start_planner(planner)
    # Given garbage on the requests topic, a request the planner refuses, and a good one
    producer = Producer(pipeline.settings.kafka.producer_config())
    producer.produce(pipeline.settings.topics.requests, key=b"unit/junk", value=b"\x00not avro")
    assert producer.flush(30) == 0
    refused, good = submit(
        pipeline, request("doc-bad", content="PERMANENT"), request("doc-ok", content="Alice.")
    )

    # Then both failures are DLQ entries with their coordinates and reason
    entries = {e.document_id: e for e in pipeline.dlq_entries(2)}
    assert set(entries) == {"junk", "doc-bad"}
    assert entries["junk"].code is StatusCode.INVALID_ARGUMENT
    assert "not Avro single-object encoded" in entries["junk"].message
    bad = entries["doc-bad"]
    assert (bad.space, bad.original_topic) == ("unit", pipeline.settings.topics.requests)
    assert bad.original_offset is not None and bad.error_class == "PlanningError"
    assert "says PERMANENT" in bad.message
    # the refused submission says where it went; the good one was planned
    assert wait_submission(pipeline, refused).dlq_id == bad.dlq_id
    assert wait_submission(pipeline, good).operation_id is not None
    assert planner.calls["unit/doc-bad"] == 1  # a permanent failure is not retried
    # and the DLQ topic holds their envelopes
    dlq_keys = {key for key, _, _ in read_to_end(pipeline.settings, pipeline.settings.topics.dlq)}
    assert dlq_keys == {e.dlq_id.encode() for e in entries.values()}


def test_a_transient_failure_holds_its_partition_only_and_honours_retry_after(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(plan_partitions=2)
    planner = build(pipeline.settings)
    pipeline.start_planner(planner)
    # Given a request whose extraction fails twice, asking for 2.5 s each time, then a few others
    (flaky,) = submit(pipeline, request("doc-flaky", content="TRANSIENT 2 AFTER 2.5 Alice."))
    others = submit(pipeline, *(request(f"doc-{i}", content="Bob.") for i in range(6)))

    # Then it is planned after three calls, each retry waiting the delay it was told
    planned = wait_submission(pipeline, flaky, timeout_s=30)
    assert planned.operation_id is not None
    assert planner.calls["unit/doc-flaky"] == 3
    first, second, third = planner.called_at["unit/doc-flaky"]
    asked = timedelta(seconds=2.5)
    assert second - first >= asked and third - second >= asked
    done = [wait_submission(pipeline, i) for i in others]
    assert all(s.operation_id for s in done)
    # requests behind it on its partition waited for it (order per partition is kept) ...
    behind = [s for s in done if s.source[1] == planned.source[1]]
    assert all(s.planned_at >= planned.planned_at for s in behind)
    # ... while those on the other partition did not wait for its retry
    beside = [s for s in done if s.source[1] != planned.source[1]]
    assert beside, "every request landed on one partition: submit more"
    assert all(s.planned_at < first + asked for s in beside)
    assert len(plans_on_topic(pipeline)) == 7


def test_a_transient_failure_past_the_budget_goes_to_the_dlq(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory()
    settings = pipeline.settings.model_copy(
        update={
            "planner": pipeline.settings.planner.model_copy(
                update={"retry_budget_s": 0.5, "retry_initial_backoff_s": 0.05}
            )
        }
    )
    planner = build(settings)
    pipeline.start_planner(planner, settings)
    (stuck,) = submit(pipeline, request("doc-stuck", content="TRANSIENT 1000"))

    (entry,) = pipeline.dlq_entries(1)
    assert (entry.document_id, entry.code) == ("doc-stuck", StatusCode.UNAVAILABLE)
    assert entry.attempts >= 2
    assert wait_submission(pipeline, stuck).dlq_id == entry.dlq_id
    assert plans_on_topic(pipeline) == []


def test_a_plan_above_the_size_limit_round_trips_through_the_claim_check_and_applies(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory()
    settings = pipeline.settings.model_copy(
        update={"topics": pipeline.settings.topics.model_copy(update={"max_message_bytes": 4096})}
    )
    pipeline.start_planner(build(settings), settings)
    pipeline.start_applier(settings=settings)
    # Given a request whose plan (300 nodes, 300 edges) is far larger than the topic takes
    big, small = submit(pipeline, request("doc-big", content="BIG 300 Alice."), request("doc-s"))

    # Then both apply, the big one's plan read from PostgreSQL
    planned = wait_submission(pipeline, big)
    assert planned.operation_id is not None
    pipeline.wait_stage(planned.operation_id, Stage.COMPLETED)
    small_op = wait_submission(pipeline, small).operation_id
    assert small_op is not None
    pipeline.wait_stage(small_op, Stage.COMPLETED)
    stored = pipeline.store.get_plan_bytes(planned.operation_id)
    assert stored is not None
    plan = decode_plan(stored)
    assert len(stored) > 4096 and len(plan.mutation.node_upserts) == 301
    nodes, edges = pipeline.graph_elements()
    assert len(nodes) >= 301 and len(edges) >= 300
    # and on the topic it was a reference, the small one a plan
    messages = {key: (value, headers) for key, value, headers in plans_on_topic(pipeline)}
    value, headers = messages[b"unit/doc-big"]
    assert headers[kafka_headers.CLAIM_CHECK] == b"v1" and len(value) < 4096
    assert kafka_headers.CLAIM_CHECK not in messages[b"unit/doc-s"][1]
    claims = pipeline.store.plan_claims([(plan.operation_id, plan.fingerprint)])
    assert claims == {(plan.operation_id, plan.fingerprint): stored}


# Header values the planner records in PostgreSQL, as no producer of ours writes them: each one
# used to fail the batch's PostgreSQL transaction (or the worker) on every planning of it.
POISONED_HEADERS: dict[str, dict[str, bytes]] = {
    "doc-nul-submission": {kafka_headers.SUBMISSION_ID: b"sub-\x00-nul"},
    "doc-long-submission": {kafka_headers.SUBMISSION_ID: b"s" * 5_000},
    "doc-empty-submission": {kafka_headers.SUBMISSION_ID: b""},
}
# Headers that only say how a copy came (a replan, a DLQ replay): unusable values make the request
# a first-hand one, planned as any other.
ODD_HEADERS: dict[str, dict[str, bytes]] = {
    "doc-nul-replan": {kafka_headers.REPLAN_OF: b"op-\x00", kafka_headers.REPLAN_ATTEMPT: b"1"},
    "doc-long-replan": {kafka_headers.REPLAN_OF: b"o" * 5_000, kafka_headers.REPLAN_ATTEMPT: b"1"},
    "doc-huge-attempt": {kafka_headers.REPLAN_OF: b"op-x", kafka_headers.REPLAN_ATTEMPT: b"9" * 12},
    "doc-superscript-attempt": {
        kafka_headers.REPLAN_OF: b"op-x",
        kafka_headers.REPLAN_ATTEMPT: "²".encode(),
    },
    "doc-nul-trace": {kafka_headers.TRACEPARENT: b"00-\x00", "x-note": b"a\x00b"},
}


def produce_requests(pipeline: Pipeline, requests: dict[str, dict[str, bytes]]) -> dict[str, str]:
    """One request per document (content ``Alice.``) with the producer's headers overridden by
    ``requests[document]``, all in one flush; the submission id each was sent with."""
    producer = Producer(pipeline.settings.kafka.producer_config())
    sent = {}
    for document_id, overrides in requests.items():
        message, submitted = request_message(
            request(document_id, content="Alice."),
            pipeline.settings.topics.requests,
            max_bytes=pipeline.settings.topics.max_message_bytes,
        )
        headers: dict[str, str | bytes | None] = {
            **{k: v.encode() for k, v in message.headers.items()},
            **overrides,
        }
        producer.produce(message.topic, key=message.key, value=message.value, headers=headers)
        sent[document_id] = submitted.submission_id
    assert producer.flush(30) == 0
    return sent


def test_a_header_postgresql_cannot_hold_dead_letters_its_request_and_the_batch_goes_on(
    pipeline: Pipeline,
) -> None:
    # Given one batch: healthy requests, requests whose submission id PostgreSQL cannot hold,
    # and requests with odd replan or trace headers
    healthy = produce_requests(pipeline, {"doc-ok-1": {}, "doc-ok-2": {}, **ODD_HEADERS})
    produce_requests(pipeline, POISONED_HEADERS)
    planner = build(pipeline.settings)
    pipeline.start_planner(planner)

    # Then every healthy request is planned, the odd ones as first-hand requests
    for document_id, submission_id in healthy.items():
        planned = wait_submission(pipeline, submission_id, timeout_s=30)
        assert planned.document_id == document_id and planned.operation_id is not None
    # and each poisoned one is a planning DLQ entry saying which header is wrong
    entries = {e.document_id: e for e in pipeline.dlq_entries(len(POISONED_HEADERS))}
    assert set(entries) == set(POISONED_HEADERS)
    for entry in entries.values():
        assert entry.code is StatusCode.INVALID_ARGUMENT
        assert "header submission_id is no storable id" in entry.message
    # and nothing was planned twice: a later request goes through, nothing more was dead-lettered
    (later,) = submit(pipeline, request("doc-later"))
    assert wait_submission(pipeline, later).operation_id is not None
    assert all(planner.calls[f"unit/{d}"] == 1 for d in healthy)
    assert not any(planner.calls[f"unit/{d}"] for d in POISONED_HEADERS)
    assert len(pipeline.store.list_dlq_entries(DlqQuery())) == len(POISONED_HEADERS)
    assert len(plans_on_topic(pipeline)) == len(healthy) + 1
    assert pipeline.sql("SELECT count(*) FROM ingest_replans") == [(0,)]
