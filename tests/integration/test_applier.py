"""The applier end to end against real Kafka, Neo4j and PostgreSQL."""

import pytest

from graph_ingest.domain.mutation import EdgeUpsert, Mutation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_plan
from tests.integration.pipeline import Pipeline
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ALICE = Entity("Person", "Alice", aliases=("Al",))
BOB = Entity("Person", "Bob")
ACME = Entity("Company", "Acme")
GLOBEX = Entity("Company", "Globex")
BERLIN = Entity("City", "Berlin")
CAROL = Entity("Person", "Carol")


def doc_v1(p: Pipeline, document_id: str = "doc-1") -> IngestionPlan:
    return sample_plan(
        "it",
        document_id,
        "Alice works at Acme in Berlin.",
        [ALICE, ACME, BERLIN],
        [Relation(ALICE, "WORKS_AT", ACME), Relation(ACME, "LOCATED_IN", BERLIN)],
        graph=p.graph,
    )


def doc_v2(p: Pipeline, previous: DocumentState) -> IngestionPlan:
    return sample_plan(
        "it",
        previous.document_id,
        "Alice works at Globex in Berlin.",
        [ALICE, GLOBEX, BERLIN],
        [Relation(ALICE, "WORKS_AT", GLOBEX), Relation(GLOBEX, "LOCATED_IN", BERLIN)],
        previous=previous,
        graph=p.graph,
    )


def stale_edit(p: Pipeline, v1: IngestionPlan) -> IngestionPlan:
    """An edit of doc-1 made on an old copy: built on ``v1``'s revision, whatever came since."""
    return sample_plan(
        "it",
        v1.document_id,
        "Alice works at Acme, edited on an old copy.",
        [ALICE, ACME],
        [Relation(ALICE, "KNOWS", ACME)],
        previous=v1.next_state,
        graph=p.graph,
    )


def with_mutation(plan: IngestionPlan, mutation: Mutation) -> IngestionPlan:
    """The plan, frozen again with another mutation (and so another fingerprint)."""
    return IngestionPlan.freeze(
        **{**plan.model_dump(exclude={"fingerprint", "mutation"}), "mutation": mutation}
    )


def planned_elements(*plans: IngestionPlan) -> tuple[set[str], set]:  # type: ignore[type-arg]
    nodes = {n.node_id for p in plans for n in p.mutation.node_upserts}
    edges = {e.key for p in plans for e in p.mutation.edge_upserts}
    return nodes, edges


def test_a_published_plan_completes_with_graph_state_history_registry_and_events(
    pipeline: Pipeline,
) -> None:
    # Given an applier and a relay
    pipeline.start_applier()
    pipeline.start_relay()
    plan = doc_v1(pipeline)
    # When the plan is published
    pipeline.publish(plan)
    # Then it completes
    operation = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert operation.attempts == 0
    # and Neo4j holds exactly the planned nodes and edges
    assert pipeline.graph_elements() == planned_elements(plan)
    # and the document is at revision 1 with one history row
    state = pipeline.store.get_document_state("it", "doc-1")
    assert state is not None
    assert (state.revision, state.operation_id) == (1, plan.operation_id)
    assert [h.revision for h in pipeline.store.document_history("it", "doc-1")] == [1]
    # and every entity is registered
    registry = pipeline.sql(
        "SELECT entity_type, normalized_name, node_id, aliases FROM entity_registry"
    )
    assert {(t, n, i) for t, n, i, _ in registry} == {
        (r.entity_type, r.normalized_name, r.node_id) for r in plan.registrations
    }
    assert ["Al"] in [list(a) for *_, a in registry]
    # and the stage events are on the operation log, in order
    events = [e for e in pipeline.operation_events(4) if e.operation_id == plan.operation_id]
    assert [(e.sequence, e.stage) for e in events][:4] == [
        (1, Stage.PREPARED),
        (2, Stage.GRAPH_APPLIED),
        (3, Stage.STATE_COMMITTED),
        (4, Stage.COMPLETED),
    ]


def test_republishing_a_plan_changes_nothing(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    plan = doc_v1(pipeline)
    pipeline.publish(plan)
    first = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert pipeline.writer.mutations_written == 1
    # When the same plan arrives again, followed by a marker plan of another document
    marker = doc_v1(pipeline, "doc-marker")
    pipeline.publish(plan, marker)
    pipeline.wait_stage(marker.operation_id, Stage.COMPLETED)
    # Then the duplicate caused no graph write and no new stage
    assert pipeline.writer.mutations_written == 2  # the marker only
    again = pipeline.store.get_operation(plan.operation_id)
    assert again is not None
    assert again.sequence == first.sequence
    assert pipeline.store.get_document_state("it", "doc-1").revision == 1  # type: ignore[union-attr]


def test_same_operation_id_with_another_plan_goes_to_the_dlq(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    plan = doc_v1(pipeline)
    pipeline.publish(plan)
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    # When a different plan reuses the operation id
    impostor = with_mutation(
        plan,
        plan.mutation.model_copy(
            update={
                "edge_upserts": (
                    *plan.mutation.edge_upserts,
                    EdgeUpsert(src=ALICE.node_id("it"), type="KNOWS", dst=ALICE.node_id("it")),
                )
            }
        ),
    )
    assert impostor.operation_id == plan.operation_id
    assert impostor.fingerprint != plan.fingerprint
    pipeline.publish(impostor)
    # Then it goes to the DLQ with its bytes kept, and nothing changed
    (entry,) = pipeline.dlq_entries(1)
    assert (entry.code, entry.operation_id) == ("ALREADY_EXISTS", impostor.operation_id)
    assert decode_dlq_envelope(entry.envelope).original_value == encode_plan(impostor)
    assert pipeline.writer.mutations_written == 1
    assert pipeline.graph_elements() == planned_elements(plan)
    assert pipeline.store.get_operation(plan.operation_id).fingerprint == plan.fingerprint  # type: ignore[union-attr]


def test_a_plan_built_on_a_stale_revision_ends_in_conflict_without_graph_write(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    pipeline.publish(v1, v2)
    pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)
    written = pipeline.writer.mutations_written
    graph = pipeline.graph_elements()
    # When a plan built on revision 1 arrives after revision 2 committed
    stale = stale_edit(pipeline, v1)
    pipeline.publish(stale)
    # Then it ends in CONFLICT and the graph is untouched
    conflict = pipeline.wait_stage(stale.operation_id, Stage.CONFLICT)
    assert conflict.last_error is not None
    assert conflict.last_error.error_class == "RevisionConflict"
    assert "revision 2" in conflict.last_error.message
    assert pipeline.writer.mutations_written == written
    assert pipeline.graph_elements() == graph
    assert pipeline.store.get_document_state("it", "doc-1").revision == 2  # type: ignore[union-attr]


def test_two_versions_of_one_document_apply_in_order(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    pipeline.publish(v1, v2)
    pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)
    assert pipeline.wait_stage(v1.operation_id, Stage.COMPLETED)
    history = pipeline.store.document_history("it", "doc-1")
    assert [(h.revision, h.operation_id) for h in history] == [
        (1, v1.operation_id),
        (2, v2.operation_id),
    ]
    nodes, edges = pipeline.graph_elements()
    # v2 superseded Alice-WORKS_AT->Acme and Acme-LOCATED_IN->Berlin: those edges are gone
    assert edges == planned_elements(v2)[1]
    assert nodes == planned_elements(v1, v2)[0]


def test_a_plan_ahead_of_the_document_parks_until_its_predecessor_commits(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    pipeline.start_relay()
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    # When v2 arrives before v1
    pipeline.publish(v2)
    parked = pipeline.wait_stage(v2.operation_id, Stage.PARKED)
    assert parked.last_error is not None
    assert "parked until" in parked.last_error.message
    pipeline.publish(v1)
    # Then v1 completes and releases v2, which completes after it
    pipeline.wait_stage(v1.operation_id, Stage.COMPLETED)
    done = pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)
    assert Stage.PARKED in done.stage_times
    assert pipeline.store.get_document_state("it", "doc-1").revision == 2  # type: ignore[union-attr]


def test_undecodable_and_tampered_plans_go_to_the_dlq_and_do_not_wedge_the_partition(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    good = doc_v1(pipeline)
    tampered = doc_v1(pipeline, "doc-tampered")
    tampered = tampered.model_copy(
        update={"document_version": "999"}
    )  # fingerprint no longer matches
    key = good.key.encode()  # same partition as the good plan, ahead of it
    pipeline.publish_raw(key, b"\x00not avro at all")
    pipeline.publish_raw(key, encode_plan(tampered))
    pipeline.publish(good)
    pipeline.wait_stage(good.operation_id, Stage.COMPLETED)
    entries = pipeline.dlq_entries(2)
    assert [e.code for e in entries] == ["INVALID_ARGUMENT", "DATA_LOSS"]
    assert decode_dlq_envelope(entries[0].envelope).original_value == b"\x00not avro at all"
    assert pipeline.store.get_operation(tampered.operation_id) is None


def test_a_plan_that_cannot_apply_is_isolated_and_the_rest_of_the_batch_goes_on(
    pipeline: Pipeline,
) -> None:
    good = [doc_v1(pipeline, f"doc-{i}") for i in range(5)]
    broken = sample_plan(
        "it",
        "doc-broken",
        "Bob knows a ghost.",
        [BOB],
        [],
        graph=pipeline.graph,
    )
    broken = with_mutation(
        broken,
        broken.mutation.model_copy(
            update={
                "edge_upserts": (
                    EdgeUpsert(src=BOB.node_id("it"), type="KNOWS", dst="it:person:ghost"),
                )
            }
        ),
    )
    # Given all of them published before the applier starts, so they share a batch
    pipeline.publish(*good[:2], broken, *good[2:])
    pipeline.start_applier()
    for plan in good:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    failed = pipeline.wait_stage(broken.operation_id, Stage.DEAD_LETTERED)
    assert failed.last_error is not None
    assert failed.last_error.code == "FAILED_PRECONDITION"
    assert "ghost" in failed.last_error.message
    assert BOB.node_id("it") not in pipeline.graph_elements()[0]
    assert pipeline.store.get_document_state("it", "doc-broken") is None


# -- a plan's outcome does not depend on its batch neighbours (issue 9, item 11) -------------


def bob_knows_carol(p: Pipeline) -> IngestionPlan:
    """Bob -[KNOWS]-> Carol, upserting Bob only: Carol must already exist."""
    plan = sample_plan(
        "it",
        "doc-bob",
        "Bob knows Carol.",
        [BOB, CAROL],
        [Relation(BOB, "KNOWS", CAROL)],
        graph=p.graph,
    )
    mutation = plan.mutation
    bob_only = tuple(n for n in mutation.node_upserts if n.node_id == BOB.node_id("it"))
    return with_mutation(plan, mutation.model_copy(update={"node_upserts": bob_only}))


def carol(p: Pipeline) -> IngestionPlan:
    return sample_plan("it", "doc-carol", "Carol.", [CAROL], [], graph=p.graph)


def test_an_edge_to_a_node_only_a_later_plan_creates_fails_as_it_does_alone(
    one_partition_pipeline: Pipeline,
) -> None:
    pipeline = one_partition_pipeline
    edge_first, node_after = bob_knows_carol(pipeline), carol(pipeline)
    # Given the edge's plan and, right behind it, the plan that creates its endpoint, in one poll
    pipeline.publish(edge_first, node_after)
    pipeline.start_applier()
    # Then Carol's plan completes, in a batch after the edge's, which failed for want of Carol,
    # as it would alone
    pipeline.wait_stage(node_after.operation_id, Stage.COMPLETED)
    failed = pipeline.store.get_operation(edge_first.operation_id)
    assert failed is not None
    assert failed.stage is Stage.DEAD_LETTERED
    assert failed.last_error is not None
    assert failed.last_error.code == "FAILED_PRECONDITION"
    assert "does not exist" in failed.last_error.message
    assert CAROL.node_id("it") in failed.last_error.message
    assert pipeline.graph_elements() == ({CAROL.node_id("it")}, set())


def test_an_edge_to_a_node_an_earlier_plan_creates_succeeds_in_one_batch(
    one_partition_pipeline: Pipeline,
) -> None:
    pipeline = one_partition_pipeline
    node_first, edge_after = carol(pipeline), bob_knows_carol(pipeline)
    pipeline.publish(node_first, edge_after)
    pipeline.start_applier()
    pipeline.wait_stage(node_first.operation_id, Stage.COMPLETED)
    pipeline.wait_stage(edge_after.operation_id, Stage.COMPLETED)
    assert pipeline.graph_elements() == planned_elements(node_first, edge_after)


def linked_pair(p: Pipeline) -> IngestionPlan:
    """Bob -[KNOWS]-> Carol, both upserted."""
    return sample_plan(
        "it",
        "doc-pair",
        "Bob knows Carol.",
        [BOB, CAROL],
        [Relation(BOB, "KNOWS", CAROL)],
        graph=p.graph,
    )


def plan_of(p: Pipeline, document_id: str, mutation: Mutation) -> IngestionPlan:
    return with_mutation(sample_plan("it", document_id, "-", [], [], graph=p.graph), mutation)


def test_a_node_delete_that_a_later_edge_delete_would_allow_fails_as_it_does_alone(
    one_partition_pipeline: Pipeline,
) -> None:
    pipeline = one_partition_pipeline
    pair = linked_pair(pipeline)
    knows = pair.mutation.edge_upserts[0].key
    delete_carol = plan_of(pipeline, "doc-delete", Mutation(node_deletes=(CAROL.node_id("it"),)))
    unlink = plan_of(pipeline, "doc-unlink", Mutation(edge_deletes=(knows,)))
    # Given the pair, then a plain delete of Carol (still linked), then the delete of the link,
    # published together: the two deletes wait behind the pair, then share a poll
    pipeline.publish(pair, delete_carol, unlink)
    pipeline.start_applier()
    # Then the link's delete completes, in a batch after Carol's delete, which failed as it would
    # alone
    pipeline.wait_stage(unlink.operation_id, Stage.COMPLETED)
    failed = pipeline.store.get_operation(delete_carol.operation_id)
    assert failed is not None
    assert failed.stage is Stage.DEAD_LETTERED
    assert failed.last_error is not None
    assert failed.last_error.code == "FAILED_PRECONDITION"
    assert "still have relationships" in failed.last_error.message
    assert pipeline.graph_elements() == ({BOB.node_id("it"), CAROL.node_id("it")}, set())


def test_a_node_delete_after_the_delete_of_its_last_edge_succeeds(
    one_partition_pipeline: Pipeline,
) -> None:
    pipeline = one_partition_pipeline
    pair = linked_pair(pipeline)
    knows = pair.mutation.edge_upserts[0].key
    unlink = plan_of(pipeline, "doc-unlink", Mutation(edge_deletes=(knows,)))
    delete_carol = plan_of(pipeline, "doc-delete", Mutation(node_deletes=(CAROL.node_id("it"),)))
    pipeline.publish(pair, unlink, delete_carol)
    pipeline.start_applier()
    pipeline.wait_stage(unlink.operation_id, Stage.COMPLETED)
    pipeline.wait_stage(delete_carol.operation_id, Stage.COMPLETED)
    assert pipeline.graph_elements() == ({BOB.node_id("it")}, set())
