"""The planner with the llm extractor (the fake chat server stands in for the paid API; nothing
else is faked): planned on the real PostgreSQL view, applied by the real applier."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from graph_ingest.domain.plan import IngestionPlan, PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.planning.llm_output import MALFORMED_OUTPUT
from graph_ingest.planning.metrics import PlanningMetrics
from graph_ingest.planning.planner import Planner
from graph_ingest.settings.llm import LlmSettings
from graph_ingest.wiring import build_planner
from tests.fake_chat_server import FakeChatServer, completion, running_fake_chat_server
from tests.integration.pipeline import Pipeline
from tests.unit.planning_fakes import issue_count, request
from tests.unit.test_llm_extractor import answer, entity

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TEXT = "Bob Stone is a member of the Payments Team."
MEMBER_OF: dict[str, Any] = {
    "segment": "s1",
    "type": "MEMBER_OF",
    "source": {"type": "Person", "name": "Bob Stone"},
    "target": {"type": "Team", "name": "Payments Team"},
    "properties": {},
    "confidence": 0.9,
    "quotes": ["is a member of the Payments Team"],
}
VALID = answer(
    entity("s1", "Person", "Bob Stone", "Bob Stone", role=None),
    entity("s1", "Team", "Payments Team", "Payments Team", cost_center=None),
    relations=(MEMBER_OF,),
)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with running_fake_chat_server() as server:
        yield server


@contextmanager
def llm_planner(
    pipeline: Pipeline,
    server: FakeChatServer,
    model: str,
    registry: CollectorRegistry | None = None,
) -> Iterator[Planner]:
    settings = pipeline.real_planner_settings(extractor="llm").model_copy(
        update={"llm": LlmSettings(base_url=server.base_url, model=model, max_attempts=1)}
    )
    planner = build_planner(settings, metrics=PlanningMetrics(registry or CollectorRegistry()))
    planner.start()
    try:
        yield planner
    finally:
        planner.close()


def names(plan: IngestionPlan) -> set[str]:
    return {str(n.properties["name"]) for n in plan.mutation.node_upserts}


def test_a_valid_answer_becomes_a_plan_of_those_entities_and_relations(
    pipeline: Pipeline, server: FakeChatServer
) -> None:
    server.script(VALID)
    registry = CollectorRegistry()
    with llm_planner(pipeline, server, "model-a", registry) as planner:
        plan = planner.plan(request("memo", TEXT))

    assert plan.kind is PlanKind.INGESTION
    assert names(plan) == {"Bob Stone", "Payments Team"}
    assert [e.type for e in plan.mutation.edge_upserts] == ["MEMBER_OF"]
    assert (plan.provenance.extractor, plan.provenance.model) == ("llm", "model-a")
    assert server.received[0].body["model"] == "model-a"
    assert issue_count(registry, MALFORMED_OUTPUT) == 0  # known codes are exported at 0


def test_malformed_output_is_a_counted_issue_and_the_plan_goes_on_without_it(
    pipeline: Pipeline, server: FakeChatServer
) -> None:
    server.script(completion('{"entities": [{"segment": "s1"'))
    registry = CollectorRegistry()
    with llm_planner(pipeline, server, "model-a", registry) as planner:
        plan = planner.plan(request("memo", TEXT))

    assert issue_count(registry, MALFORMED_OUTPUT) == 1
    assert plan.kind is PlanKind.INGESTION and plan.mutation.node_upserts == ()


def test_another_model_re_extracts_an_unchanged_document_the_same_model_does_not(
    pipeline: Pipeline, server: FakeChatServer
) -> None:
    pipeline.start_applier()
    server.script(VALID)
    with llm_planner(pipeline, server, "model-a") as planner:
        first = planner.plan(request("memo", TEXT))
        pipeline.publish(first)
        pipeline.wait_stage(first.operation_id, Stage.COMPLETED)
        # the same model, the same document: NO_OP, the endpoint not asked again
        again = planner.plan(request("memo", TEXT))
    assert again.kind is PlanKind.NO_OP and len(server.received) == 1

    # When the model changes
    server.script(VALID)
    with llm_planner(pipeline, server, "model-b") as planner:
        other = planner.plan(request("memo", TEXT))

    # Then the document is extracted again, with another extraction fingerprint
    assert [r.body["model"] for r in server.received] == ["model-a", "model-b"]
    assert other.kind is PlanKind.INGESTION and other.expected_revision == 1
    fingerprints = {p.next_state.extraction_fingerprint for p in (first, other)}
    assert len(fingerprints) == 2
