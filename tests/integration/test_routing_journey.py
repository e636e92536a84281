"""Failure routing keeps a plan's journey whatever the message carries (issue 16 items 4, 6, 15, 16).

Against real Kafka, Neo4j and PostgreSQL; faults are injected by wrapping the real Neo4j writer.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.dlq.entries import with_status
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_plan
from graph_ingest.schemas.headers import RetryHeaders
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.test_applier import doc_v1, planned_elements
from tests.integration.test_failure_routing import (
    BABBAGE,
    ROUTING,
    babbage,
    babbage_times_out,
    replay,
    three_versions,
)
from tests.kafka_messages import read_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def failures_recorded(pipeline: Pipeline, count: int) -> None:
    """Wait until ``count`` failures were routed (each in the transaction of its DLQ entry)."""
    wait_until(
        lambda: pipeline.sql("SELECT count(*) FROM failure_attempts")[0][0] >= count,
        timeout_s=60,
        what=f"{count} routed failures",
    )


def test_a_nul_in_a_header_neither_stops_the_applier_nor_the_plans_journey(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given a plan that always times out, published with a NUL in a header
    pipeline = pipeline_factory(**ROUTING)
    plan, bystander = babbage(pipeline), doc_v1(pipeline)
    applier = pipeline.start_applier(babbage_times_out(pipeline))
    pipeline.publish_raw(plan.key.encode(), encode_plan(plan), headers={"note": b"a\x00b"})
    # Then it walks every tier to the DLQ, the applier alive and applying the rest
    pipeline.wait_stage(plan.operation_id, Stage.DEAD_LETTERED, timeout_s=60)
    pipeline.publish(bystander)
    pipeline.wait_stage(bystander.operation_id, Stage.COMPLETED)
    assert applier.is_alive()
    (entry,) = pipeline.dlq_entries(1)
    envelope = decode_dlq_envelope(entry.envelope)
    assert [a.tier for a in envelope.attempts] == [None, 0, 1, 2]
    # each tier copy, and so the last one the DLQ keeps, carries the header with its NUL escaped
    assert ("note", b"a\\x00b") in [(h.key, h.value) for h in envelope.original_headers]
    for topic, _ in pipeline.settings.topics.retry_tiers:
        ((_, _, headers),) = read_to_end(pipeline.settings, topic)
        assert headers["note"] == b"a\\x00b"
    assert pipeline.graph_elements() == planned_elements(bystander)


def test_retry_headers_holding_a_nul_make_the_plan_poison_and_the_applier_goes_on(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given a plan published with retry headers whose original topic holds a NUL
    pipeline = pipeline_factory(**ROUTING)
    plan, bystander = babbage(pipeline), doc_v1(pipeline)
    writer = FailingWriter(
        pipeline.settings, StatusCode.INVALID_ARGUMENT, culprits=[BABBAGE.node_id("it")]
    )
    applier = pipeline.start_applier(writer)
    now = datetime.now(UTC)
    forged = RetryHeaders(
        attempt=2,
        due_at=now,
        original_topic=pipeline.settings.topics.plans,
        original_partition=0,
        original_offset=0,
        first_failure_at=now,
        error_code=StatusCode.DEADLINE_EXCEEDED,
        error_class="GraphError",
        error_message="timed out",
        trace_id=new_trace_id(),
    ).to_headers()
    headers: dict[str, str | bytes | None] = dict(forged)
    headers[kafka_headers.ORIGINAL_TOPIC] = b"plans\x00"
    pipeline.publish_raw(plan.key.encode(), encode_plan(plan), headers=headers)
    pipeline.publish(bystander)
    # Then it is dead-lettered for its headers, and the applier applies the rest
    pipeline.wait_stage(bystander.operation_id, Stage.COMPLETED)
    (entry,) = pipeline.dlq_entries(1)
    assert entry.code is StatusCode.INVALID_ARGUMENT
    assert "retry headers invalid: original_topic" in entry.message
    assert entry.original_topic == pipeline.settings.topics.plans
    assert applier.is_alive()
    assert pipeline.store.get_operation(plan.operation_id) is None


def replayed_by_hand(pipeline: Pipeline, entry: DlqEntry, value: bytes) -> None:
    """What a replay does to an entry holding no plan the CLI would re-publish: marked REPLAYED,
    its message published again with ``dlq_replay: <id>``."""
    with pipeline.store.unit_of_work() as uow:
        uow.put_dlq_entries([with_status(entry, DlqStatus.REPLAYED, "replayed by hand")])
    pipeline.publish_raw(b"it/poison", value, headers={kafka_headers.DLQ_REPLAY: entry.dlq_id})


def test_a_failed_replay_of_a_message_without_operation_returns_to_its_entry(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(plan_partitions=1)
    poison = b"\x8f\x00\xff not a plan"
    pipeline.start_applier()
    pipeline.publish_raw(b"it/poison", poison)
    (entry,) = pipeline.dlq_entries(1)
    # When it is replayed twice and fails each time
    for replays in (1, 2):
        replayed_by_hand(pipeline, pipeline.dlq_entries(1)[0], poison)
        failures_recorded(pipeline, 1 + replays)
    # Then one entry holds the three attempts, pending review, where it first came from
    (again,) = pipeline.dlq_entries(1)
    envelope = decode_dlq_envelope(again.envelope)
    assert again.dlq_id == entry.dlq_id
    assert again.status is DlqStatus.PENDING_REVIEW
    assert [a.attempt for a in envelope.attempts] == [1, 2, 3]
    assert {a.code for a in envelope.attempts} == {StatusCode.INVALID_ARGUMENT}
    assert (again.original_partition, again.original_offset) == (0, 0)
    assert envelope.original_value == poison


def test_a_resumed_plan_failing_with_internal_reaches_the_dlq_after_the_bound(
    pipeline_factory: PipelineFactory,
) -> None:
    # A tier far off: only the resume delivers the plan again during the test
    pipeline = pipeline_factory(retry_delays_s=(600.0,), max_internal_attempts=2, **ROUTING)
    plan = babbage(pipeline)
    writer = FailingWriter(pipeline.settings, StatusCode.INTERNAL, culprits=[BABBAGE.node_id("it")])
    pipeline.start_applier(writer)
    pipeline.publish(plan)
    pipeline.wait_stage(plan.operation_id, Stage.FAILED)
    # When it is resumed and fails a second time
    resumed = CliRunner(env=pipeline.env()).invoke(cli, ["resume", plan.operation_id])
    assert resumed.exit_code == 0, resumed.output
    failures_recorded(pipeline, 2)
    # Then the second delivery was its last (APPLIER__MAX_INTERNAL_ATTEMPTS): the DLQ
    routed = pipeline.sql("SELECT attempt, routed_to FROM failure_attempts ORDER BY attempt")
    assert routed == [(1, "TIER"), (2, "DLQ")]
    dead = pipeline.wait_stage(plan.operation_id, Stage.DEAD_LETTERED)
    assert dead.last_error is not None and dead.last_error.code is StatusCode.INTERNAL


def v1_failing(
    pipeline_factory: PipelineFactory, code: StatusCode
) -> tuple[Pipeline, IngestionPlan, IngestionPlan]:
    """One plans partition (v1 goes to offset 0, v2 to offset 1), an applier on which v1's
    graph write always fails with ``code``, and v1 published."""
    pipeline = pipeline_factory(plan_partitions=1, **ROUTING)
    v1, v2, _ = three_versions(pipeline)
    pipeline.start_applier(FailingWriter(pipeline.settings, code, culprits=[BABBAGE.node_id("it")]))
    pipeline.publish(v1)
    return pipeline, v1, v2


def assert_follows_from_offset_1(
    pipeline: Pipeline, follower: DlqEntry, leader: IngestionPlan
) -> None:
    """The follower's entry names its leader and where the follower was delivered."""
    assert follower.parked_behind == leader.operation_id
    assert (follower.original_topic, follower.original_partition, follower.original_offset) == (
        pipeline.settings.topics.plans,
        0,
        1,
    )


def test_a_follower_keeps_the_position_of_its_first_delivery_in_its_dlq_entry(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given v1 in the DLQ (one partition: v1 at offset 0, v2 at offset 1)
    pipeline, v1, v2 = v1_failing(pipeline_factory, StatusCode.INVALID_ARGUMENT)
    pipeline.wait_stage(v1.operation_id, Stage.DEAD_LETTERED)
    # When v2 arrives and follows it there
    pipeline.publish(v2)
    pipeline.wait_stage(v2.operation_id, Stage.DEAD_LETTERED)
    # Then v2's entry says where v2 was delivered, with its headers
    entries = {e.operation_id: e for e in pipeline.dlq_entries(2)}
    follower = entries[v2.operation_id]
    assert_follows_from_offset_1(pipeline, follower, v1)
    headers = dict(
        (h.key, h.value) for h in decode_dlq_envelope(follower.envelope).original_headers
    )
    assert headers[kafka_headers.OPERATION_ID] == v2.operation_id.encode()
    # and when v2 is replayed while v1 is still there, it follows again to the same entry,
    # keeping that position rather than its replay's
    replay(pipeline, follower)
    wait_until(
        lambda: (
            pipeline.sql(
                "SELECT count(*) FROM failure_attempts WHERE operation_id = %s", v2.operation_id
            )[0][0]
            == 2
        ),
        timeout_s=60,
        what="v2 to follow v1 a second time",
    )
    again = {e.operation_id: e for e in pipeline.dlq_entries(2)}[v2.operation_id]
    assert (again.dlq_id, again.attempts, again.status) == (
        follower.dlq_id,
        2,
        DlqStatus.PENDING_REVIEW,
    )
    assert (again.original_partition, again.original_offset) == (0, 1)


def test_a_follower_parked_before_its_leader_failed_keeps_its_first_delivery_position(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given v1 timing out on its way up the ladder, and v2 parked behind it meanwhile (one
    # partition: v1 at offset 0, v2 at offset 1); v2 itself never fails
    pipeline, v1, v2 = v1_failing(pipeline_factory, StatusCode.DEADLINE_EXCEEDED)
    pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    pipeline.publish(v2)
    pipeline.wait_stage(v2.operation_id, Stage.PARKED)
    # When v1 reaches the DLQ after its last tier, and v2 follows it there from PARKED
    pipeline.wait_stage(v2.operation_id, Stage.DEAD_LETTERED, timeout_s=90)
    # Then v2's entry says where v2 was first delivered, not (plans, None, None)
    follower = {e.operation_id: e for e in pipeline.dlq_entries(2)}[v2.operation_id]
    assert_follows_from_offset_1(pipeline, follower, v1)
