"""The pure part of reconcile: a committed state against what the graph returned."""

import dataclasses

from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.reconcile.drift import Drift, compare, repair_plan, unlisted_in_graph
from graph_ingest.store.documents import CommittedElements
from tests.samples import Entity, Relation, sample_plan
from tests.unit.plans import ACME, ALICE, BERLIN, plan_for

GLOBEX = Entity("Company", "Globex")


def elements(plan: IngestionPlan) -> CommittedElements:
    s = plan.next_state
    return CommittedElements(
        space=s.space,
        document_id=s.document_id,
        revision=s.revision,
        operation_id=s.operation_id,
        node_ids=s.node_ids,
        edge_keys=s.edge_keys,
        superseded_edge_keys=s.superseded_edge_keys,
    )


def v2() -> IngestionPlan:
    """Alice moved from Acme to Globex: v1's two edges are superseded."""
    return sample_plan(
        "unit",
        "doc",
        "Alice works at Globex in Berlin.",
        [ALICE, GLOBEX, BERLIN],
        [Relation(ALICE, "WORKS_AT", GLOBEX), Relation(GLOBEX, "LOCATED_IN", BERLIN)],
        previous=plan_for("doc").next_state,
    )


def all_of(plan: IngestionPlan) -> tuple[set[str], set[EdgeKey]]:
    s = plan.next_state
    return set(s.node_ids), set(s.edge_keys)


def test_a_graph_holding_everything_and_nothing_superseded_is_clean() -> None:
    plan = plan_for("doc")
    nodes, edges = all_of(plan)
    drift = compare(elements(plan), nodes, edges)
    assert drift.is_clean
    assert (drift.space, drift.document_id, drift.revision) == ("unit", "doc", 1)
    assert drift.operation_id == plan.operation_id


def test_missing_nodes_and_edges_are_exactly_those_the_graph_lacks() -> None:
    plan = plan_for("doc")
    nodes, edges = all_of(plan)
    gone_edge = EdgeKey(src=ACME.node_id("unit"), type="LOCATED_IN", dst=BERLIN.node_id("unit"))
    drift = compare(elements(plan), nodes - {ALICE.node_id("unit")}, edges - {gone_edge})
    assert drift.missing_nodes == (ALICE.node_id("unit"),)
    assert drift.missing_edges == (gone_edge,)
    assert drift.unexpected_edges == ()
    assert not drift.is_clean


def test_elements_of_other_documents_in_the_graph_do_not_matter() -> None:
    plan = plan_for("doc")
    nodes, edges = all_of(plan)
    other = EdgeKey(src="x", type="KNOWS", dst="y")
    assert compare(elements(plan), nodes | {"x", "y"}, edges | {other}).is_clean


def test_superseded_edges_still_in_the_graph_are_unexpected() -> None:
    plan = v2()
    nodes, edges = all_of(plan)
    superseded = set(plan.next_state.superseded_edge_keys)
    assert len(superseded) == 2
    drift = compare(elements(plan), nodes, edges | superseded)
    assert set(drift.unexpected_edges) == superseded
    assert drift.missing_nodes == () and drift.missing_edges == ()
    # and gone from the graph, they are not
    assert compare(elements(plan), nodes, edges).is_clean


def test_a_superseded_edge_another_document_claims_is_not_unexpected() -> None:
    plan = v2()
    nodes, edges = all_of(plan)
    first, second = sorted(plan.next_state.superseded_edge_keys, key=EdgeKey.sort_key)
    present = edges | {first, second}
    assert set(unlisted_in_graph(elements(plan), present)) == {first, second}
    drift = compare(elements(plan), nodes, present, claimed_elsewhere={first})
    assert drift.unexpected_edges == (second,)


def test_an_edge_both_listed_and_superseded_is_not_unexpected() -> None:
    plan = plan_for("doc")
    state = elements(plan)
    own = state.edge_keys[0]
    contradictory = dataclasses.replace(state, superseded_edge_keys=(own,))
    nodes, edges = all_of(plan)
    assert compare(contradictory, nodes, edges).is_clean


def test_drift_lists_are_sorted_and_unique() -> None:
    plan = plan_for("doc")
    drift = compare(elements(plan), set(), set())
    assert list(drift.missing_nodes) == sorted(plan.next_state.node_ids)
    assert list(drift.missing_edges) == sorted(plan.next_state.edge_keys, key=EdgeKey.sort_key)


def test_repair_plan_restores_only_the_drifted_elements_as_the_plan_wrote_them() -> None:
    plan = v2()
    alice = ALICE.node_id("unit")
    gone = plan.mutation.edge_upserts[0].key
    unexpected = plan.next_state.superseded_edge_keys[:1]
    drift = Drift(
        "unit",
        "doc",
        2,
        plan.operation_id,
        missing_nodes=(alice,),
        missing_edges=(gone,),
        unexpected_edges=unexpected,
    )
    repair = repair_plan(plan, drift)
    assert [n.node_id for n in repair.mutation.node_upserts] == [alice]
    assert repair.mutation.node_upserts[0] == next(
        n for n in plan.mutation.node_upserts if n.node_id == alice
    )
    assert [e.key for e in repair.mutation.edge_upserts] == [gone]
    assert repair.mutation.edge_deletes == unexpected
    assert repair.mutation.node_deletes == ()
    assert repair.unrestorable_nodes == () and repair.unrestorable_edges == ()


def test_repair_plan_names_what_the_plan_does_not_upsert() -> None:
    base = plan_for("doc")
    delta = IngestionPlan.freeze(
        **{
            **base.model_dump(exclude={"fingerprint", "mutation"}),
            "mutation": Mutation(node_upserts=base.mutation.node_upserts[:1]),
        }
    )
    kept = delta.mutation.node_upserts[0].node_id
    others = tuple(n for n in base.next_state.node_ids if n != kept)
    edge = base.next_state.edge_keys[0]
    drift = Drift(
        "unit", "doc", 1, delta.operation_id, missing_nodes=(kept, *others), missing_edges=(edge,)
    )
    repair = repair_plan(delta, drift)
    assert [n.node_id for n in repair.mutation.node_upserts] == [kept]
    assert repair.mutation.edge_upserts == ()
    assert set(repair.unrestorable_nodes) == set(others)
    assert repair.unrestorable_edges == (edge,)


def test_an_edge_around_the_documents_nodes_that_no_state_lists_is_unexpected() -> None:
    # Given a committed state and the graph around it, holding an edge of another lineage that
    # the state never listed, not even as superseded
    plan = plan_for("doc")
    state = elements(plan)
    nodes, edges = all_of(plan)
    ghost = EdgeKey(src=state.node_ids[0], type="LEFT_BY_V1", dst=state.node_ids[1], rank=0)
    elsewhere = EdgeKey(src=state.node_ids[1], type="OTHERS", dst="n:far", rank=0)
    touching = edges | {ghost, elsewhere}
    # When it is compared, the edge another document lists (elsewhere) being claimed
    drift = compare(state, nodes, touching, claimed_elsewhere={elsewhere}, touching=touching)
    # Then only the unlisted one is unexpected
    assert drift.unexpected_edges == (ghost,)


def test_an_edge_kept_by_the_keep_policy_is_not_unexpected() -> None:
    plan = plan_for("doc")
    state = elements(plan)
    nodes, edges = all_of(plan)
    kept = EdgeKey(src=state.node_ids[0], type="WAS_KEPT", dst=state.node_ids[1], rank=0)
    keeping = dataclasses.replace(state, kept_edge_keys=(kept,))
    touching = edges | {kept}
    assert compare(keeping, nodes, touching, touching=touching).is_clean
    assert compare(state, nodes, touching, touching=touching).unexpected_edges == (kept,)
