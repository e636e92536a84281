"""Regressions of the apply loop's defects (issue 9), each against real Kafka, Neo4j and PostgreSQL.

Faults are injected only where a real service cannot be made to misbehave on cue (a plan that
always times out, a sick database): by wrapping the real Neo4j writer, never by replacing it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import (
    decode_dlq_envelope,
    encode_plan,
    read_single_object,
    write_single_object,
)
from graph_ingest.schemas.registry import BUNDLED, PLAN
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.test_applier import doc_v1, doc_v2, planned_elements
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FAST_RETRIES: dict[str, Any] = {"retry_initial_backoff_s": 0.05, "retry_max_backoff_s": 0.2}
ADA = Entity("Person", "Ada Lovelace")
BABBAGE = Entity("Person", "Charles Babbage")


def reencoded(plan: IngestionPlan, change: Any) -> bytes:
    """The plan's Avro record after ``change(record)``, written as a valid Avro message (the
    record is not validated: a producer in another language can send exactly this)."""
    record = read_single_object(encode_plan(plan), PLAN)
    change(record)
    return write_single_object(BUNDLED.current(PLAN), record)


# -- items 1 and 2: hostile input is poison, never the worker's death ---------------------------


def test_input_that_breaks_third_party_code_or_postgres_text_goes_to_the_dlq_and_the_rest_applies(
    pipeline: Pipeline,
) -> None:
    good = doc_v1(pipeline)
    key = good.key.encode()  # one partition: every poison message sits ahead of the good plan

    def huge_rank(record: dict[str, Any]) -> None:
        record["mutation"]["edge_upserts"][0]["rank"] = 2**60  # rfc8785 refuses it

    def nul_fingerprint(record: dict[str, Any]) -> None:
        record["fingerprint"] = "v1:\x00tampered"

    def nul_operation_id(record: dict[str, Any]) -> None:
        record["operation_id"] = record["next_state"]["operation_id"] = "op-\x00-nul"

    poison = [
        reencoded(doc_v1(pipeline, "doc-rank"), huge_rank),
        reencoded(doc_v1(pipeline, "doc-fingerprint"), nul_fingerprint),
        reencoded(doc_v1(pipeline, "doc-operation"), nul_operation_id),
    ]
    pipeline.start_applier()
    for value in poison:
        pipeline.publish_raw(key, value)
    pipeline.publish_raw(key, b"\x01 not avro", headers={"operation_id": b"op-\x00-header"})
    pipeline.publish(good)
    # Then the good plan behind them completes: the worker lived through all of them
    pipeline.wait_stage(good.operation_id, Stage.COMPLETED)
    entries = pipeline.dlq_entries(4)
    envelopes = [decode_dlq_envelope(e.envelope) for e in entries]
    assert [e.original_value for e in envelopes] == [*poison, b"\x01 not avro"]
    assert {e.code for e in entries} == {"INVALID_ARGUMENT"}
    # what it says about itself is kept as it was sent, and made storable where it is quoted
    assert ("operation_id", b"op-\x00-header") in [
        (h.key, h.value) for h in envelopes[-1].original_headers
    ]


# -- item 5: whatever the state commit would refuse is refused before the graph write -----------


def with_node_id(plan: IngestionPlan, old: str, new: str) -> IngestionPlan:
    fields = json.loads(plan.model_dump_json(exclude={"fingerprint"}).replace(old, new))
    return IngestionPlan.freeze(**fields)


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "later-batch"])
def test_a_registry_conflict_dead_letters_the_plan_before_its_graph_write(
    pipeline: Pipeline, same_batch: bool
) -> None:
    doc_a = sample_plan("it", "doc-a", "Ada.", [ADA], [], graph=pipeline.graph)
    other_node = "it:person:ada-OTHER"
    doc_b = with_node_id(
        sample_plan("it", "doc-b", "Ada.", [ADA], [], graph=pipeline.graph),
        ADA.node_id("it"),
        other_node,
    )
    if same_batch:
        pipeline.publish(doc_a, doc_b)
        pipeline.start_applier()
    else:
        pipeline.start_applier()
        pipeline.publish(doc_a)
        pipeline.wait_stage(doc_a.operation_id, Stage.COMPLETED)
        pipeline.publish(doc_b)
    pipeline.wait_stage(doc_a.operation_id, Stage.COMPLETED)
    failed = pipeline.wait_stage(doc_b.operation_id, Stage.DEAD_LETTERED)
    assert failed.last_error is not None
    assert failed.last_error.code == StatusCode.FAILED_PRECONDITION
    assert "registry conflict" in failed.last_error.message
    assert Stage.GRAPH_APPLIED not in failed.stage_times
    assert pipeline.graph_elements()[0] == {ADA.node_id("it")}
    assert pipeline.store.get_document_state("it", "doc-b") is None


# -- items 6 and 8: how long to retry in place, and whom to blame -------------------------------


def test_a_plan_that_always_times_out_is_isolated_after_bounded_retries_and_the_rest_apply(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(**FAST_RETRIES)
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(4)]
    oversized = sample_plan("it", "doc-huge", "Babbage.", [BABBAGE], [], graph=pipeline.graph)
    writer = FailingWriter(
        pipeline.settings, StatusCode.DEADLINE_EXCEEDED, culprits=[BABBAGE.node_id("it")]
    )
    pipeline.publish(*plans[:2], oversized, *plans[2:])
    pipeline.start_applier(writer)
    for plan in plans:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    # It walks the retry ladder (each hop applies it alone again), then reaches the DLQ
    failed = pipeline.wait_stage(oversized.operation_id, Stage.DEAD_LETTERED)
    assert failed.last_error is not None
    assert failed.last_error.code == StatusCode.DEADLINE_EXCEEDED
    (entry,) = pipeline.dlq_entries(1)
    tiers = [a.tier for a in decode_dlq_envelope(entry.envelope).attempts]
    assert tiers == [None, 0, 1, 2]
    assert pipeline.graph_elements() == planned_elements(*plans)


# ABORTED too: a lone plan losing lock waits is routed only while the services answer a probe.
@pytest.mark.parametrize("code", [StatusCode.INTERNAL, StatusCode.ABORTED])
def test_a_sick_database_fails_no_plan_and_the_backlog_applies_once_it_recovers(
    pipeline_factory: PipelineFactory, code: StatusCode
) -> None:
    pipeline = pipeline_factory(**FAST_RETRIES)
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(4)]
    writer = FailingWriter(pipeline.settings, code)
    writer.sick.set()
    pipeline.publish(*plans)
    pipeline.start_applier(writer)
    # Far more failed writes and probes than the in-place budget: it would have split and failed
    # every plan
    wait_until(lambda: writer.failures >= 15, timeout_s=60, what="15 failed writes or probes")
    assert pipeline.sql("SELECT count(*) FROM operations WHERE stage = 'FAILED'") == [(0,)]
    assert pipeline.sql("SELECT count(*) FROM failure_attempts") == [(0,)]
    writer.sick.clear()
    for plan in plans:
        done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
        assert done.attempts == 0
    assert pipeline.graph_elements() == planned_elements(*plans)


@contextmanager
def restricted_role(pipeline: Pipeline) -> Iterator[tuple[Settings, str]]:
    """A PostgreSQL login role with every right on the pipeline's schema; dropped at the end."""
    schema = pipeline.settings.postgres.schema_name
    role = f"{schema}_role"
    admin = pipeline.settings.postgres.conninfo()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        conn.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
    settings = pipeline.settings.model_copy(
        update={"postgres": pipeline.settings.postgres.model_copy(update={"user": role})}
    )
    try:
        yield settings, role
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_revoked_privileges_pause_the_applier_without_failing_a_plan(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(**FAST_RETRIES)
    first, *later = [doc_v1(pipeline, f"doc-{i}") for i in range(3)]
    with restricted_role(pipeline) as (settings, role):
        pipeline.start_applier(settings=settings)
        pipeline.publish(first)
        pipeline.wait_stage(first.operation_id, Stage.COMPLETED)
        # When the applier's role loses the right to commit document states
        pipeline.execute(f'REVOKE INSERT, UPDATE ON document_states FROM "{role}"')
        retried = pipeline.retries_logged()
        pipeline.publish(*later)
        wait_until(
            lambda: pipeline.retries_logged() >= retried + 10, timeout_s=60, what="10 retries"
        )
        # Then no plan is failed for it
        assert pipeline.sql("SELECT count(*) FROM operations WHERE stage = 'FAILED'") == [(0,)]
        assert pipeline.sql("SELECT count(*) FROM failure_attempts") == [(0,)]
        # and once the right is back, the plans complete
        pipeline.execute(f'GRANT INSERT, UPDATE ON document_states TO "{role}"')
        for plan in later:
            done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
            assert done.attempts == 0
        pipeline.stop_workers()  # before the role goes


# -- item 14: one rule for the schema name -----------------------------------------------------


def test_a_mixed_case_schema_name_is_the_schema_every_component_uses(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(schema_prefix="t_MixedCase_")
    pipeline.start_applier()
    pipeline.start_relay()
    plan = doc_v1(pipeline)
    pipeline.publish(plan)
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    events = [e for e in pipeline.operation_events(4) if e.operation_id == plan.operation_id]
    assert [e.stage for e in events][-1] is Stage.COMPLETED
    schema = pipeline.settings.postgres.schema_name
    lower = pipeline.sql("SELECT 1 FROM pg_namespace WHERE nspname = %s", schema.lower())
    assert lower == []  # nothing went to the folded name


# -- issue 20: a backlog of large documents fits PostgreSQL's lock table -------------------------

LARGE_PLANS, ENTITIES_PER_PLAN = 30, 1_000


def large_plan(pipeline: Pipeline, number: int) -> IngestionPlan:
    entities = [Entity("Thing", f"thing {number} {i}") for i in range(ENTITIES_PER_PLAN)]
    return sample_plan(
        "it", f"large-{number}", f"Large {number}.", entities, [], graph=pipeline.graph
    )


def test_a_backlog_of_large_documents_applies_without_running_postgres_out_of_locks(
    pipeline_factory: PipelineFactory,
) -> None:
    """Each plan registers 1,000 entity nodes, an advisory lock each in the graph step: the
    backlog in one batch would take 30,000, past the test stack's lock table (64 locks per
    transaction x 200 connections). The batch bound on locks keeps every batch inside it, so no
    batch fails with "out of shared memory" and is retried in place, then split."""
    pipeline = pipeline_factory(
        plan_partitions=1, batch_max_bytes=256 * 1024 * 1024, **FAST_RETRIES
    )
    plans = [large_plan(pipeline, n) for n in range(LARGE_PLANS)]
    pipeline.publish(*plans)  # all waiting before the applier polls: one fetch could hold them
    pipeline.start_applier()
    for plan in plans:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=120)
    assert pipeline.retries_logged() == 0
    (registered,) = pipeline.sql(
        f'SELECT count(*) FROM "{pipeline.settings.postgres.schema_name}".entity_registry'
    )
    assert registered == (LARGE_PLANS * ENTITIES_PER_PLAN,)


POLL_TIMEOUT_S = 10.0


def test_a_plan_deferred_from_a_batch_is_applied_without_waiting_for_new_input(
    pipeline_factory: PipelineFactory,
) -> None:
    """Two revisions of one document wait together: the second is deferred from the first's
    batch (revision order). Nothing more arrives, so a loop that polled for new input before
    applying what it holds would wait its whole poll timeout first."""
    pipeline = pipeline_factory(plan_partitions=1, poll_timeout_s=POLL_TIMEOUT_S)
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    pipeline.publish(v1, v2)
    pipeline.start_applier()
    first = pipeline.wait_stage(v1.operation_id, Stage.COMPLETED)
    second = pipeline.wait_stage(v2.operation_id, Stage.COMPLETED, timeout_s=4 * POLL_TIMEOUT_S)
    gap = second.stage_times[Stage.COMPLETED] - first.stage_times[Stage.COMPLETED]
    assert gap < timedelta(seconds=POLL_TIMEOUT_S / 2), f"v2 completed {gap} after v1"
