"""A plan past the size limit goes as a claim-check reference however it is sent again: released
from PARKED, or replayed from the DLQ (resume and recover: tests/unit/test_recovery.py)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import parse_claim_reference
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.schemas.plan_messages import sized_plan_message
from graph_ingest.settings import Settings
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MAX_BYTES = 4096


def small_settings(pipeline: Pipeline) -> Settings:
    topics = pipeline.settings.topics.model_copy(update={"max_message_bytes": MAX_BYTES})
    return pipeline.settings.model_copy(update={"topics": topics})


def small(pipeline: Pipeline) -> IngestionPlan:
    alice, bob = Entity("Person", "Alice"), Entity("Person", "Bob")
    return sample_plan(
        "it", "doc-1", "Alice met Bob.", [alice, bob], [Relation(alice, "MET", bob)],
        graph=pipeline.graph,
    )  # fmt: skip


def big(pipeline: Pipeline, previous: DocumentState) -> IngestionPlan:
    things = [Entity("Thing", f"Filler{i:04d}") for i in range(300)]
    relations = [Relation(a, "NEXT_TO", b) for a, b in pairwise(things)]
    return sample_plan(
        "it", "doc-1", "many things", things, relations, previous=previous, graph=pipeline.graph
    )


def publish_claim_checked(pipeline: Pipeline, plan: IngestionPlan) -> None:
    """As the planner sends a plan past the limit: its claim stored, then the reference."""
    message, claim = sized_plan_message(
        plan, pipeline.settings.topics.plans, value=encode_plan(plan), max_bytes=MAX_BYTES
    )
    assert claim is not None
    with pipeline.store.unit_of_work() as uow:
        uow.put_plan_claims([claim])
    assert message.key is not None
    pipeline.publish_raw(message.key, message.value, dict(message.headers))


def test_an_oversized_plan_released_from_parked_goes_as_a_reference_and_applies(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier(settings=small_settings(pipeline))
    pipeline.start_relay()
    v1 = small(pipeline)
    v2 = big(pipeline, v1.next_state)
    # Given the oversized v2 arrives (as a reference) before v1 and parks
    publish_claim_checked(pipeline, v2)
    pipeline.wait_stage(v2.operation_id, Stage.PARKED)

    # When v1 completes and releases it
    pipeline.publish(v1)
    pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)

    # Then the released copy on the plans topic was a reference too, and v2 applied
    released = [
        (value, headers)
        for _, value, headers in read_to_end(pipeline.settings, pipeline.settings.topics.plans)
        if headers.get(kafka_headers.RELEASED) == b"parked"
    ]
    assert len(released) == 1
    value, headers = released[0]
    assert headers[kafka_headers.CLAIM_CHECK] == b"v1" and len(value) < MAX_BYTES
    assert parse_claim_reference(value).key == (v2.operation_id, v2.fingerprint)
    state = pipeline.store.get_document_state("it", "doc-1")
    assert state is not None and state.operation_id == v2.operation_id
    nodes, edges = pipeline.graph_elements()
    assert len(nodes) == 302 and len(edges) == 299
