"""What a plan may not carry (``domain.limits``) is refused when the applier decodes it, against real
Kafka, Neo4j and PostgreSQL: the message goes to the DLQ with its reason, the partition moves on."""

from __future__ import annotations

from typing import Any

import pytest

from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import encode_plan
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1, planned_elements

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def sealed(plan: IngestionPlan, mutation: Mutation) -> IngestionPlan:
    """The plan with ``mutation``, its fingerprint computed again, built the way a publisher in
    another language could: no validation on the way (``model_copy`` runs none)."""
    changed = plan.model_copy(update={"mutation": mutation})
    return changed.model_copy(update={"fingerprint": changed.computed_fingerprint()})


def nul_in_node_name(plan: IngestionPlan) -> IngestionPlan:
    node = plan.mutation.node_upserts[0]
    named = node.model_copy(update={"properties": {**node.properties, "name": "Al\x00ice"}})
    nodes = (named, *plan.mutation.node_upserts[1:])
    return sealed(plan, plan.mutation.model_copy(update={"node_upserts": nodes}))


def nul_in_edge_list(plan: IngestionPlan) -> IngestionPlan:
    edge = plan.mutation.edge_upserts[0]
    tagged = edge.model_copy(update={"properties": {"tags": ["ok", "b\x00d"]}})
    edges = (tagged, *plan.mutation.edge_upserts[1:])
    return sealed(plan, plan.mutation.model_copy(update={"edge_upserts": edges}))


@pytest.mark.parametrize(
    ("change", "named"),
    [(nul_in_node_name, "property 'name'"), (nul_in_edge_list, "property 'tags'")],
)
def test_a_nul_in_a_property_value_sends_the_plan_to_the_dlq_naming_the_property(
    one_partition_pipeline: Pipeline, change: Any, named: str
) -> None:
    pipeline = one_partition_pipeline
    # Given a plan whose property value holds a NUL, as anyone publishing plans could write it
    invalid = change(doc_v1(pipeline, "doc-nul"))
    after = doc_v1(pipeline, "doc-after")
    pipeline.start_applier()
    # When it is published, then a good plan behind it on the same partition
    pipeline.publish_raw(invalid.key.encode(), encode_plan(invalid))
    pipeline.publish(after)
    # Then it lands in the DLQ as invalid, its reason naming the property, and the rest applies
    pipeline.wait_stage(after.operation_id, Stage.COMPLETED)
    (entry,) = pipeline.dlq_entries(1)
    assert entry.code is StatusCode.INVALID_ARGUMENT
    assert named in entry.message and "NUL" in entry.message
    assert pipeline.graph_elements() == planned_elements(after)
