"""Failure routing (issue 6 items 3 and 4) against real Kafka, Neo4j and PostgreSQL: retry tiers,
the DLQ, poison, and per-document order across retries.

Transient faults are injected by wrapping the real Neo4j writer (``FailingWriter``), never by
replacing it. With ``in_place_max_attempts=1`` one failed *delivery* is two failed writes: the
batch is tried once in place, then alone, and only then routed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.consumers.applier.apply import Outcome
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import TraceParent
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import (
    decode_dlq_envelope,
    encode_operation,
    encode_plan,
    read_single_object,
    write_single_object,
)
from graph_ingest.schemas.registry import BUNDLED, PLAN
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.wiring import build_applier, postgres_store, started
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.test_applier import doc_v1, doc_v2, planned_elements, with_mutation
from tests.kafka_messages import read_to_end
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ONE_DELIVERY = 2  # failed writes per failed delivery, with in_place_max_attempts=1
ROUTING: dict[str, Any] = {
    "retry_initial_backoff_s": 0.05,
    "retry_max_backoff_s": 0.2,
    "in_place_max_attempts": 1,
}
BABBAGE = Entity("Person", "Charles Babbage")


def babbage(pipeline: Pipeline, document_id: str = "doc-babbage") -> IngestionPlan:
    return sample_plan("it", document_id, "Babbage.", [BABBAGE], [], graph=pipeline.graph)


def babbage_times_out(pipeline: Pipeline, deliveries: int | None = None) -> FailingWriter:
    """A writer whose writes of Babbage time out: for ``deliveries`` deliveries, else always."""
    return FailingWriter(
        pipeline.settings,
        StatusCode.DEADLINE_EXCEEDED,
        culprits=[BABBAGE.node_id("it")],
        fail_times=None if deliveries is None else deliveries * ONE_DELIVERY,
    )


def hop_delays(entry: DlqEntry) -> list[float]:
    """Seconds between consecutive failed attempts of a DLQ entry's history."""
    attempts = decode_dlq_envelope(entry.envelope).attempts
    return [(b.at - a.at).total_seconds() for a, b in pairwise(attempts)]


def test_a_fault_that_persists_walks_1s_5s_30s_then_the_dlq_with_one_trace_id(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(retry_delays_s=(1.0, 5.0, 30.0), **ROUTING)
    culprit, bystander = babbage(pipeline), doc_v1(pipeline)
    writer = babbage_times_out(pipeline)
    trace = TraceParent.new()
    pipeline.start_applier(writer)
    pipeline.start_projector()
    pipeline.publish_raw(
        culprit.key.encode(),
        encode_plan(culprit),
        headers={kafka_headers.TRACEPARENT: trace.header_value()},
    )
    pipeline.publish(bystander)
    pipeline.wait_stage(bystander.operation_id, Stage.COMPLETED)
    dead = pipeline.wait_stage(culprit.operation_id, Stage.DEAD_LETTERED, timeout_s=120)
    # Then its DLQ entry holds the four attempts: main topic, then each tier, one trace throughout
    (entry,) = pipeline.dlq_entries(1)
    envelope = decode_dlq_envelope(entry.envelope)
    assert [a.tier for a in envelope.attempts] == [None, 0, 1, 2]
    assert [a.attempt for a in envelope.attempts] == [1, 2, 3, 4]
    assert {a.trace_id for a in envelope.attempts} == {trace.trace_id}
    assert {a.code for a in envelope.attempts} == {StatusCode.DEADLINE_EXCEEDED}
    assert (entry.operation_id, entry.status) == (culprit.operation_id, DlqStatus.PENDING_REVIEW)
    assert (envelope.original_topic, envelope.original_value) == (
        pipeline.settings.topics.plans,
        encode_plan(culprit),
    )
    assert dead.dlq_id == entry.dlq_id
    # and no hop came early
    delays = hop_delays(entry)
    assert all(d >= want for d, want in zip(delays, (1.0, 5.0, 30.0), strict=True)), delays
    # and each tier carried exactly one copy of it
    for topic, _ in pipeline.settings.topics.retry_tiers:
        copies = read_to_end(pipeline.settings, topic)
        assert [key for key, _, _ in copies] == [culprit.key.encode()]
    # and `status` shows every failure with its structured detail
    runner = CliRunner(env=pipeline.env())
    shown = json.loads(
        runner.invoke(cli, ["status", culprit.operation_id, "--wait", "60s", "--json"]).output
    )
    failures = shown["failures"]
    assert [(f["tier"], f["routed_to"]) for f in failures] == [
        (None, "TIER"),
        (0, "TIER"),
        (1, "TIER"),
        (2, "DLQ"),
    ]
    assert failures[0]["detail"]["retry"] == {
        "retryable": True,
        "attempts_left": 3,
        "retry_after_s": 1.0,
        "strategy": "NEXT_TIER",
    }
    assert failures[-1]["detail"]["retry"]["strategy"] == "DEAD_LETTER"
    assert failures[0]["detail"]["context"]["topic"] == pipeline.settings.topics.plans
    assert failures[0]["detail"]["context"]["stage"] == "PREPARED"
    assert {f["detail"]["trace_id"] for f in failures} == {trace.trace_id}
    human = runner.invoke(cli, ["status", culprit.operation_id, "--wait", "60s"]).output
    assert f"dlq entry   {entry.dlq_id}" in human
    # each of the four failures under "failures" and on its own step under "transitions"
    steps, failures_shown = human.split("\ntransitions\n", 1)[1].split("\nfailures\n", 1)
    step_lines = steps.split("\nlast error")[0]
    assert (step_lines.count(trace.trace_id), failures_shown.count(trace.trace_id)) == (4, 4)


def test_a_fault_once_completes_after_one_retry_no_earlier_than_its_delay(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(**ROUTING)
    plan = babbage(pipeline)
    writer = babbage_times_out(pipeline, deliveries=1)
    pipeline.start_applier(writer)
    pipeline.publish(plan)
    done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert Stage.FAILED in done.stage_times
    assert done.attempts == 1
    routed = pipeline.sql("SELECT attempt, tier, routed_to, at FROM failure_attempts")
    assert [(a, t, r) for a, t, r, _ in routed] == [(1, None, "TIER")]
    first_delay = pipeline.settings.topics.retry_delays_s[0]
    assert done.stage_times[Stage.GRAPH_APPLIED] - routed[0][3] >= timedelta(seconds=first_delay)
    assert pipeline.sql("SELECT count(*) FROM dlq_entries") == [(0,)]
    assert pipeline.graph_elements() == planned_elements(plan)


def reencoded(plan: IngestionPlan, change: Any) -> bytes:
    """The plan's Avro record after ``change(record)``, written as a valid Avro message."""
    record = read_single_object(encode_plan(plan), PLAN)
    change(record)
    return write_single_object(BUNDLED.current(PLAN), record)


def test_poison_of_every_kind_lands_in_the_dlq_with_its_reason_while_the_rest_applies(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(plan_partitions=1, max_plan_bytes=20_000)
    done = doc_v1(pipeline, "doc-done")

    def illegal_edge_type(record: dict[str, Any]) -> None:
        record["mutation"]["edge_upserts"][0]["type"] = "KNOWS) DETACH DELETE n //"

    def tampered(record: dict[str, Any]) -> None:
        record["document_version"] = "999"

    small = sample_plan("it", "doc-huge", "Babbage.", [BABBAGE], [], graph=pipeline.graph)
    node = small.mutation.node_upserts[0]
    bio = node.model_copy(update={"properties": {**node.properties, "bio": "x" * 30_000}})
    huge = with_mutation(small, small.mutation.model_copy(update={"node_upserts": (bio,)}))
    impostor = with_mutation(done, done.mutation.model_copy(update={"edge_upserts": ()}))
    operation_event = encode_operation(
        Operation.prepared(
            operation_id="op-event",
            space="it",
            document_id="doc-event",
            expected_revision=0,
            fingerprint=done.fingerprint,
            at=datetime.now(UTC),
        )
    )
    poison = {
        "random bytes": b"\x8f\x00\xff random",
        "another schema": operation_event,
        "tampered fingerprint": reencoded(doc_v1(pipeline, "doc-t"), tampered),
        "illegal identifier": reencoded(doc_v1(pipeline, "doc-i"), illegal_edge_type),
        "over the size limit": encode_plan(huge),
    }
    pipeline.start_applier()
    pipeline.publish(done)
    pipeline.wait_stage(done.operation_id, Stage.COMPLETED)
    for value in poison.values():
        pipeline.publish_raw(b"it/poison", value)
    pipeline.publish(impostor)  # an operation id bound to another plan
    good = [doc_v1(pipeline, f"doc-{i}") for i in range(3)]
    pipeline.publish(*good)
    for plan in good:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    entries = pipeline.dlq_entries(len(poison) + 1, timeout_s=30)
    reasons = _by_value(entries)
    expected_codes = {
        "random bytes": StatusCode.INVALID_ARGUMENT,
        "another schema": StatusCode.INVALID_ARGUMENT,
        "tampered fingerprint": StatusCode.DATA_LOSS,
        "illegal identifier": StatusCode.INVALID_ARGUMENT,
        "over the size limit": StatusCode.INVALID_ARGUMENT,
    }
    for kind, value in poison.items():
        entry = reasons[value]
        assert entry.code == expected_codes[kind], (kind, entry.message)
        assert entry.status is DlqStatus.PENDING_REVIEW
    assert "exceeds the limit" in reasons[poison["over the size limit"]].message
    assert "fingerprint" in reasons[poison["tampered fingerprint"]].message
    bound = reasons[encode_plan(impostor)]
    assert bound.code == StatusCode.ALREADY_EXISTS
    assert "bound to plan" in bound.message
    # the operation it claimed is untouched
    assert pipeline.store.get_operation(done.operation_id).stage is Stage.COMPLETED  # type: ignore[union-attr]
    assert pipeline.graph_elements() == planned_elements(done, *good)


def _by_value(entries: list[DlqEntry]) -> dict[bytes | None, DlqEntry]:
    return {decode_dlq_envelope(e.envelope).original_value: e for e in entries}


# -- per-document order across retries (item 4) ---------------------------------------------


def three_versions(pipeline: Pipeline) -> list[IngestionPlan]:
    alice = Entity("Person", "Alice")
    v1 = sample_plan(
        "it", "doc-x", "Babbage and Alice.", [BABBAGE, alice], [], graph=pipeline.graph
    )
    v2 = doc_v2(pipeline, v1.next_state)
    v3 = sample_plan(
        "it",
        "doc-x",
        "Alice knows Babbage.",
        [alice, BABBAGE],
        [Relation(alice, "KNOWS", BABBAGE)],
        previous=v2.next_state,
        graph=pipeline.graph,
    )
    return [v1, v2, v3]


def test_later_versions_park_behind_a_retrying_one_and_commit_after_it_in_order(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(**ROUTING)
    v1, v2, v3 = three_versions(pipeline)
    writer = babbage_times_out(pipeline, deliveries=1)
    pipeline.start_applier(writer)
    pipeline.publish(v1)
    pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    pipeline.publish(v2, v3)
    pipeline.wait_stage(v3.operation_id, Stage.PARKED)
    finished = [pipeline.wait_stage(v.operation_id, Stage.COMPLETED) for v in (v1, v2, v3)]
    assert Stage.PARKED in finished[1].stage_times and Stage.PARKED in finished[2].stage_times
    committed = [f.stage_times[Stage.STATE_COMMITTED] for f in finished]
    assert committed == sorted(committed)
    assert pipeline.store.get_document_state("it", "doc-x").revision == 3  # type: ignore[union-attr]
    assert pipeline.graph_elements()[1] == planned_elements(v3)[1]


def test_later_versions_follow_a_dead_lettered_one_and_its_replay_releases_them(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(**ROUTING)
    v1, v2, v3 = three_versions(pipeline)
    writer = babbage_times_out(pipeline)
    pipeline.start_applier(writer)
    pipeline.publish(v1)
    pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    pipeline.publish(v2, v3)
    # When v1 runs out of retries, v2 and v3 (parked behind it) follow it to the DLQ
    pipeline.wait_stage(v1.operation_id, Stage.DEAD_LETTERED)
    for follower in (v2, v3):
        dead = pipeline.wait_stage(follower.operation_id, Stage.DEAD_LETTERED)
        assert dead.last_error is not None
        assert f"parked behind {v1.operation_id}" in dead.last_error.message
    # and a version that arrives while v1 is in the DLQ follows it there at once
    v4 = sample_plan(
        "it", "doc-x", "Babbage alone.", [BABBAGE], [], previous=v3.next_state,
        graph=pipeline.graph,
    )  # fmt: skip
    pipeline.publish(v4)
    pipeline.wait_stage(v4.operation_id, Stage.DEAD_LETTERED)
    entries = {e.operation_id: e for e in pipeline.dlq_entries(4)}
    for follower in (v2, v3, v4):
        assert entries[follower.operation_id].parked_behind == v1.operation_id
    assert pipeline.store.get_document_state("it", "doc-x") is None
    # When the fault is gone and v1 is replayed, v1 completes and releases v2, v3, then v4
    writer.culprits.clear()
    replay(pipeline, entries[v1.operation_id])
    finished = [pipeline.wait_stage(v.operation_id, Stage.COMPLETED) for v in (v1, v2, v3, v4)]
    committed = [f.stage_times[Stage.STATE_COMMITTED] for f in finished]
    assert committed == sorted(committed)
    assert pipeline.store.get_document_state("it", "doc-x").revision == 4  # type: ignore[union-attr]
    statuses = dict(
        pipeline.sql("SELECT operation_id, status FROM dlq_entries WHERE parked_behind IS NOT NULL")
    )
    followers = (v2.operation_id, v3.operation_id, v4.operation_id)
    assert statuses == dict.fromkeys(followers, "REPLAYED")


def replay(pipeline: Pipeline, entry: DlqEntry) -> None:
    """What ``dlq replay`` publishes: the frozen plan, marked as a replay of the entry."""
    plan_bytes = pipeline.store.get_plan_bytes(entry.operation_id or "")
    assert plan_bytes is not None
    pipeline.publish_raw(
        f"{entry.space}/{entry.document_id}".encode(),
        plan_bytes,
        headers={
            kafka_headers.OPERATION_ID: entry.operation_id or "",
            kafka_headers.DLQ_REPLAY: entry.dlq_id,
        },
    )


def test_a_failure_redelivered_before_its_offset_commit_is_routed_only_once(
    pipeline: Pipeline,
) -> None:
    plan = babbage(pipeline)
    # the fault is gone by the redelivery: applying it then would retry it before its delay
    writer = FailingWriter(
        pipeline.settings,
        StatusCode.DEADLINE_EXCEEDED,
        culprits=[BABBAGE.node_id("it")],
        fail_times=1,  # apply() is one write: the runtime's in-place retries are not in play
    )
    store = postgres_store(pipeline.settings)
    consumed = PlanMessage(
        topic=pipeline.settings.topics.plans,
        partition=0,
        offset=7,
        key=plan.key.encode(),
        value=encode_plan(plan),
        plan=plan,
    )
    with started(store, writer):
        applier = build_applier(pipeline.settings, store, writer)
        # the worker crashed after the routing transaction, before committing the offset,
        # so the same message comes again
        first = applier.apply([consumed], in_place_exhausted=True)
        routed = store.get_operation(plan.operation_id)
        again = applier.apply([consumed], in_place_exhausted=True)
        # and the operation waits for its tier copy as the first routing left it
        waiting = store.get_operation(plan.operation_id)
    assert first == again == {consumed.position: Outcome.RETRYING}
    assert routed is not None and waiting is not None
    assert (waiting.stage, waiting.next_retry_at) == (Stage.FAILED, routed.next_retry_at)
    assert routed.next_retry_at is not None
    tier_topic = pipeline.settings.topics.retry_tiers[0][0]
    assert pipeline.sql("SELECT count(*) FROM outbox WHERE topic = %s", tier_topic) == [(1,)]
    assert pipeline.sql("SELECT count(*) FROM failure_attempts") == [(1,)]
