"""A node locked by another transaction (issue 16 item 9), against real Kafka, Neo4j and PostgreSQL:
the plan that waits on it goes down the retry ladder, and every other partition moves on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from neo4j import GraphDatabase
from prometheus_client import CollectorRegistry

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.wiring import pipeline_metrics
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import CountingWriter, Pipeline
from tests.integration.test_applier import doc_v1, planned_elements
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

# How long the applier's graph transaction may wait for a lock before Neo4j stops it.
TRANSACTION_TIMEOUT_S = 1.5
BABBAGE = Entity("Person", "Charles Babbage")


@contextmanager
def write_locked(pipeline: Pipeline, node_id: str) -> Iterator[None]:
    """An open transaction of another client holding the write lock on the node ``node_id``."""
    label = pipeline.graph.node_label
    settings = pipeline.settings.neo4j
    with (
        GraphDatabase.driver(settings.uri, auth=settings.auth()) as driver,
        driver.session(database=pipeline.graph.database) as session,
        session.begin_transaction() as tx,
    ):
        tx.run(f"MERGE (n:`{label}` {{node_id: $id}}) SET n.held = true", id=node_id).consume()
        yield
        tx.rollback()


def publish_to(pipeline: Pipeline, partition: int, plan: IngestionPlan) -> None:
    producer = Producer(pipeline.settings.kafka.producer_config())
    producer.produce(
        pipeline.settings.topics.plans,
        key=plan.key.encode(),
        value=encode_plan(plan),
        partition=partition,
    )
    assert producer.flush(30) == 0


def test_a_plan_on_a_locked_node_takes_the_1s_tier_and_other_partitions_move_on(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(
        plan_partitions=2,
        retry_delays_s=(1.0, 5.0, 30.0),
        retry_initial_backoff_s=0.05,
        retry_max_backoff_s=0.2,
        in_place_max_attempts=2,
    )
    contended = sample_plan("it", "doc-babbage", "Babbage.", [BABBAGE], [], graph=pipeline.graph)
    unrelated = doc_v1(pipeline)
    writer = CountingWriter(
        pipeline.settings.neo4j.model_copy(update={"transaction_timeout_s": TRANSACTION_TIMEOUT_S})
    )
    writer.start()
    # The label's constraint exists, as on any graph that took a plan before the lock was taken.
    writer.ensure_constraints(pipeline.graph)
    registry = CollectorRegistry()
    metrics = pipeline_metrics(pipeline.settings, "applier", registry, relay=True)
    with write_locked(pipeline, BABBAGE.node_id("it")):
        # Given a plan that MERGEs the locked node and a plan of another document elsewhere
        publish_to(pipeline, 0, contended)
        publish_to(pipeline, 1, unrelated)
        pipeline.start_applier(writer, subscribers=[metrics])
        # Then the other document completes while the lock is held
        pipeline.wait_stage(unrelated.operation_id, Stage.COMPLETED)
        # and the contended plan waits on the 1s tier, its timeout recorded as the failure
        failed = pipeline.wait_stage(contended.operation_id, Stage.FAILED)
        assert failed.attempts == 1
        assert failed.last_error is not None
        assert failed.last_error.code is StatusCode.DEADLINE_EXCEEDED
        assert "LockClientStopped" in failed.last_error.message
        # and the batch's retries in place count as lock waits, apart from deadlocks
        in_place = "graph_ingest_in_place_retries_total"
        assert (registry.get_sample_value(in_place, {"code": "lock_wait"}) or 0) >= 1
        assert registry.get_sample_value(in_place, {"code": "deadline_exceeded"}) == 0
        assert registry.get_sample_value(in_place, {"code": "deadlock"}) == 0
    # When the lock is released, the contended plan completes from the retry ladder
    done = pipeline.wait_stage(contended.operation_id, Stage.COMPLETED, timeout_s=120)
    routed = pipeline.sql(
        "SELECT attempt, tier, routed_to FROM failure_attempts WHERE operation_id = %s"
        " ORDER BY attempt",
        contended.operation_id,
    )
    assert routed[0] == (1, None, "TIER")
    assert done.attempts == len(routed)
    assert pipeline.sql("SELECT count(*) FROM dlq_entries") == [(0,)]
    assert pipeline.graph_elements() == planned_elements(contended, unrelated)
