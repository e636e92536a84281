"""Documents planned by the rules extractor over src/graph_ingest/demo/graph_schema.yaml, with the real
PostgreSQL store as the planner's view, and applied by the real applier to Neo4j."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.candidates import CandidateEvidence, EntityCandidate, Extraction
from graph_ingest.domain.plan import IngestionPlan, PlanKind
from graph_ingest.domain.request import IngestOptions, RequestKind, StaleRelationPolicy
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import EntityRegistration
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.planner import Planner
from graph_ingest.planning.rules import RulesExtractor
from graph_ingest.settings.planner import PlannerSettings
from tests.integration.pipeline import Pipeline
from tests.unit.planning_fakes import T0, CountingExtractor, example_schema, request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SETTINGS = PlannerSettings()
DOC_A = (
    "Bob is a member of the Payments Team.\n\n"
    "The Payments Team owns the Ledger Service. The Ledger Service depends on the Billing API."
)
DOC_A_V2 = "Bob is a member of the Payments Team. The Ledger Service depends on the Billing API."
DOC_B = "The Payments Team owns the Ledger Service."


def planner_for(
    pipeline: Pipeline, schema: GraphSchema | None = None
) -> tuple[Planner, CountingExtractor]:
    used = schema or example_schema()
    rules = CountingExtractor(RulesExtractor(used))
    return Planner(used, {"rules": rules}, pipeline.store, SETTINGS, graph=pipeline.graph), rules


def apply(pipeline: Pipeline, *plans: IngestionPlan, stage: Stage = Stage.COMPLETED) -> None:
    pipeline.publish(*plans)
    for plan in plans:
        pipeline.wait_stage(plan.operation_id, stage)


def registry_rows(pipeline: Pipeline) -> list[tuple[str, ...]]:
    return pipeline.sql(
        "SELECT space, entity_type, normalized_name, node_id FROM entity_registry ORDER BY 1, 2, 3"
    )


def owns_edge(plan: IngestionPlan) -> object:
    return next(k for k in plan.next_state.edge_keys if k.type == "OWNS")


def test_a_shared_edge_stays_while_another_document_supports_it(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    a1 = planner.plan(request("a", DOC_A))
    apply(pipeline, a1)
    b1 = planner.plan(request("b", DOC_B))
    apply(pipeline, b1)
    owns = owns_edge(a1)
    assert owns == owns_edge(b1)  # one edge, two supporting documents

    # When a drops the edge while b still states it
    a2 = planner.plan(request("a", DOC_A_V2, document_version="2"))
    assert owns in a2.next_state.superseded_edge_keys
    assert owns not in a2.mutation.edge_deletes
    apply(pipeline, a2)
    # Then the edge stays
    nodes, edges = pipeline.graph_elements()
    assert owns in edges

    # When b is retracted, nobody supports it any more: it goes; the nodes a lists stay
    retract_b = planner.plan(request("b", None, kind=RequestKind.RETRACT))
    assert retract_b.mutation.edge_deletes == (owns,)
    assert retract_b.mutation.node_deletes == ()
    apply(pipeline, retract_b)
    after_nodes, after_edges = pipeline.graph_elements()
    assert owns not in after_edges
    assert after_nodes == nodes
    assert after_edges == set(a2.next_state.edge_keys)
    state = pipeline.store.get_document_state("kb", "b")
    assert state is not None and (state.revision, state.node_ids, state.edge_keys) == (2, (), ())


def test_an_ambiguous_name_rejects_the_plan_and_leaves_the_registry_alone(
    pipeline: Pipeline,
) -> None:
    # Given two people registered under different names
    with pipeline.store.unit_of_work() as uow:
        uow.register_entities(
            [
                EntityRegistration(
                    space="kb",
                    entity_type="Person",
                    name=name,
                    normalized_name=name.lower(),
                    node_id=node,
                )
                for name, node in (("Alice Chen", "n-chen"), ("Alice Wong", "n-wong"))
            ]
        )
    before = registry_rows(pipeline)
    text = "Alice sent the notes."
    chunk = chunk_document("memo", text, max_chars=SETTINGS.chunk_max_chars)[0]
    alice = EntityCandidate(
        entity_type="Person",
        name="Alice",
        aliases=("Alice Chen", "Alice Wong"),
        evidence=(CandidateEvidence(chunk_id=chunk.chunk_id, quote="Alice", start=0, end=5),),
    )
    planner, _ = planner_for(pipeline)

    # When a document names one entity by both names
    with pytest.raises(PlanningError, match="ambiguous") as raised:
        planner.plan(request("memo", text, candidates=Extraction(entities=(alice,))))

    # Then nothing is planned and the registry is unchanged
    assert raised.value.code is StatusCode.FAILED_PRECONDITION
    assert "n-chen" in str(raised.value) and "n-wong" in str(raised.value)
    assert registry_rows(pipeline) == before
    assert len(planner.planned) == 0


def test_a_name_bound_meanwhile_to_another_node_rejects_the_whole_plan(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    # Two documents planned before either applies: "Bob" is Bob Stone's alias in the gazetteer;
    # the second names a Bob Ray, whom a producer's candidates give the alias "Bob" too
    first = planner.plan(request("one", "Bob joined the Payments Team."))
    text = "Bob Ray joined the Platform Team."
    chunk = chunk_document("two", text, max_chars=SETTINGS.chunk_max_chars)[0]
    bob_ray = EntityCandidate(
        entity_type="Person",
        name="Bob Ray",
        aliases=("Bob",),
        evidence=(CandidateEvidence(chunk_id=chunk.chunk_id, quote="Bob Ray", start=0, end=7),),
    )
    second = planner.plan(request("two", text, candidates=Extraction(entities=(bob_ray,))))
    apply(pipeline, first)
    before = registry_rows(pipeline)

    # When the second applies, its "bob" is bound to another node: the plan is dead-lettered
    apply(pipeline, second, stage=Stage.DEAD_LETTERED)

    # and none of its registrations is written
    assert registry_rows(pipeline) == before
    assert ("kb", "Person", "bob ray") not in {r[:3] for r in registry_rows(pipeline)}
    operation = pipeline.store.get_operation(second.operation_id)
    assert operation is not None and operation.last_error is not None
    assert operation.last_error.code is StatusCode.FAILED_PRECONDITION
    assert "refusing to reassign" in operation.last_error.message


def test_the_same_name_in_two_spaces_is_two_nodes(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)

    kb = planner.plan(request("a", DOC_B))
    other = planner.plan(request("a", DOC_B, space="other"))
    apply(pipeline, kb, other)

    kb_nodes, other_nodes = set(kb.next_state.node_ids), set(other.next_state.node_ids)
    assert len(kb_nodes) == len(other_nodes) == 2
    assert not kb_nodes & other_nodes
    nodes, _ = pipeline.graph_elements()
    assert nodes == kb_nodes | other_nodes
    bound = {(space, name): node for space, _, name, node in registry_rows(pipeline)}
    assert bound[("kb", "payments team")] != bound[("other", "payments team")]


def test_unchanged_is_a_no_op_without_extraction_and_a_new_schema_re_extracts(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    pipeline.start_projector()
    planner, rules = planner_for(pipeline)
    first = planner.plan(request("a", DOC_A))
    apply(pipeline, first)

    # An unchanged resubmission: NO_OP, the extractor called once in all
    again = planner.plan(request("a", DOC_A))
    assert (again.kind, rules.calls) == (PlanKind.NO_OP, 1)
    apply(pipeline, again)
    # it completes without touching the document: same revision, state and history
    state = pipeline.store.get_document_state("kb", "a")
    assert state is not None
    assert (state.revision, state.operation_id) == (1, first.operation_id)
    assert state.extraction_fingerprint == first.next_state.extraction_fingerprint
    assert state.fact_sources == first.next_state.fact_sources
    assert [h.revision for h in pipeline.store.document_history("kb", "a")] == [1]
    shown = CliRunner(env=pipeline.env()).invoke(
        cli, ["status", again.operation_id, "--wait", "60s", "--json"]
    )
    status = json.loads(shown.output)
    assert (status["stage"], status["plan_kind"]) == ("COMPLETED", "NO_OP")
    assert status["base_operation_id"] == first.operation_id
    # and a NO_OP that arrives after its base was moved on conflicts instead of completing
    apply(pipeline, planner.plan(request("a", DOC_A_V2, document_version="2")))
    late = IngestionPlan.freeze(
        **{**again.model_dump(exclude={"fingerprint"}), "operation_id": "op-late-no-op"}
    )
    apply(pipeline, late, stage=Stage.CONFLICT)
    assert pipeline.store.get_document_state("kb", "a").revision == 2  # type: ignore[union-attr]

    # Another document under a new schema version: extracted again, revision 2
    c1 = planner.plan(request("c", DOC_B))
    apply(pipeline, c1)
    newer, newer_rules = planner_for(pipeline, example_schema("2027-01-01"))
    c2 = newer.plan(request("c", DOC_B, schema_version="2027-01-01"))
    assert (c2.kind, newer_rules.calls) == (PlanKind.INGESTION, 1)
    apply(pipeline, c2)
    c_state = pipeline.store.get_document_state("kb", "c")
    assert c_state is not None
    assert (c_state.revision, c_state.schema_version) == (2, "2027-01-01")
    assert c_state.extraction_fingerprint == c2.next_state.extraction_fingerprint


def test_an_out_of_order_source_version_is_rejected_with_its_reason(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    apply(pipeline, planner.plan(request("a", DOC_A, document_version="7", source_updated_at=T0)))
    planner.forget([("kb", "a")])  # the committed state alone says what came before

    with pytest.raises(PlanningError) as raised:
        planner.plan(
            request(
                "a",
                DOC_A_V2,
                document_version="8",
                source_updated_at=T0 - timedelta(minutes=5),
            )
        )

    assert raised.value.code is StatusCode.FAILED_PRECONDITION
    assert "out of order" in str(raised.value)
    assert "older than 2026-12-01T09:00:00+00:00 of revision 1" in str(raised.value)
    state = pipeline.store.get_document_state("kb", "a")
    assert state is not None and state.revision == 1


def test_keep_keeps_the_dropped_relation_and_reconcile_agrees(pipeline: Pipeline) -> None:
    # Given a document whose v2 drops its OWNS relation under the KEEP policy
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    v1 = planner.plan(request("a", DOC_A))
    apply(pipeline, v1)
    keep = IngestOptions(stale_relation_policy=StaleRelationPolicy.KEEP)
    v2 = planner.plan(request("a", DOC_A_V2, document_version="2", options=keep))
    apply(pipeline, v2)
    # Then the relation stays in the graph, recorded as kept
    owns = owns_edge(v1)
    state = pipeline.store.get_document_state("kb", "a")
    assert state is not None
    assert state.kept_edge_keys == (owns,)
    assert owns in pipeline.graph_elements()[1]
    # and reconcile finds no drift, so its repair leaves the relation alone
    runner = CliRunner(env=pipeline.env())
    assert runner.invoke(cli, ["reconcile"]).exit_code == 0
    assert runner.invoke(cli, ["reconcile", "--repair"]).exit_code == 0
    assert owns in pipeline.graph_elements()[1]


def test_a_node_the_next_version_no_longer_mentions_leaves_the_graph(pipeline: Pipeline) -> None:
    # Given v1 mentions the Billing API, which no other document lists
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    v1 = planner.plan(request("a", DOC_A))
    apply(pipeline, v1)
    v2 = planner.plan(request("a", "Bob is a member of the Payments Team.", document_version="2"))
    # When v2 no longer mentions it, nor the Ledger Service
    apply(pipeline, v2)
    # Then the graph holds v2's nodes and edges exactly, and reconcile agrees
    state = pipeline.store.get_document_state("kb", "a")
    assert state is not None
    assert pipeline.graph_elements() == (set(state.node_ids), set(state.edge_keys))
    assert len(state.node_ids) < len(v1.next_state.node_ids)
    assert CliRunner(env=pipeline.env()).invoke(cli, ["reconcile"]).exit_code == 0


def test_a_node_another_document_listed_since_the_plan_was_made_is_not_deleted(
    pipeline: Pipeline,
) -> None:
    # Given v2 of document a, planned to delete the Billing API (no other document listed it)
    pipeline.start_applier()
    planner, _ = planner_for(pipeline)
    apply(pipeline, planner.plan(request("a", DOC_A)))
    v2 = planner.plan(request("a", "Bob is a member of the Payments Team.", document_version="2"))
    billing = {n for n in v2.mutation.node_deletes}
    assert billing
    # When document b, which mentions them, commits before v2 applies
    b = planner.plan(request("b", "The Ledger Service depends on the Billing API."))
    apply(pipeline, b)
    apply(pipeline, v2)
    # Then what b lists stays: the graph holds exactly what the committed states list
    states = [pipeline.store.get_document_state("kb", d) for d in ("a", "b")]
    nodes = {n for s in states for n in s.node_ids}  # type: ignore[union-attr]
    edges = {k for s in states for k in s.edge_keys}  # type: ignore[union-attr]
    assert pipeline.graph_elements() == (nodes, edges)
    assert billing & nodes
