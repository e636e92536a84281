"""How the apply loop forms its batches from what arrives while one applies, against real Kafka,
Neo4j and PostgreSQL (issue 20: latency at half load)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from confluent_kafka import TopicPartition

from graph_ingest.consumers.applier.worker import ApplierWorker
from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import build_applier, postgres_store, started
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


class FirstWriteHeld(Neo4jGraphWriter):
    """The real Neo4j writer, recording the nodes of each batch it writes and holding its first
    write until ``release`` is set."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.neo4j)
        self.holding = threading.Event()
        self.release = threading.Event()
        self.batches: list[set[str]] = []

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        if not self.batches:
            self.holding.set()
            assert self.release.wait(60), "the test never released the first write"
        self.batches.append({n.node_id for _, m in batch for n in m.node_upserts})
        super().apply(batch)


def lone_plan(pipeline: Pipeline, number: int) -> IngestionPlan:
    person = Entity("Person", f"Person {number}")
    return sample_plan(
        "it", f"doc-{number}", f"Person {number}.", [person], [], graph=pipeline.graph
    )


def upserted_nodes(plans: Sequence[IngestionPlan]) -> set[str]:
    return {n.node_id for p in plans for n in p.mutation.node_upserts}


def fetched_end(worker: ApplierWorker, topic: str) -> int:
    """The end of ``topic``'s partition 0 as the worker's client last fetched it (its cached
    high watermark: the messages before it are in the client's queue or taken)."""
    client = worker._consumer._require()
    return int(client.get_watermark_offsets(TopicPartition(topic, 0), cached=True)[1])


def test_plans_that_arrive_while_a_batch_applies_join_the_plans_fetched_ahead_of_it(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(plan_partitions=1, batch_max_plans=3)
    plans = [lone_plan(pipeline, n) for n in range(6)]
    writer = FirstWriteHeld(pipeline.settings)
    store = postgres_store(pipeline.settings)
    stop = threading.Event()
    pipeline.publish(*plans[:4])  # a batch of three, and one fetched ahead of the next batch
    with started(store, writer):
        worker = ApplierWorker(pipeline.settings, build_applier(pipeline.settings, store, writer))
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert writer.holding.wait(60), "the first batch never reached Neo4j"
            assert worker._ahead.messages == 1  # fetched before the first batch applies
            pipeline.publish(*plans[4:])
            # the worker's client has fetched them while its first batch is still held
            wait_until(
                lambda: fetched_end(worker, pipeline.settings.topics.plans) >= len(plans),
                timeout_s=60,
                what="the worker's client to fetch the plans published during the first batch",
            )
            writer.release.set()
            wait_until(
                lambda: sum(map(len, writer.batches)) == len(plans),
                timeout_s=60,
                what="every plan written",
            )
        finally:
            writer.release.set()
            stop.set()
            thread.join(timeout=60)
    # The plan fetched ahead did not go alone: what arrived meanwhile joined it
    assert writer.batches == [upserted_nodes(plans[:3]), upserted_nodes(plans[3:])]
