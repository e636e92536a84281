"""`graph-ingest reconcile` against real Kafka, Neo4j and PostgreSQL: drift made behind the
pipeline's back is found, reported per document, and repaired from the frozen plans."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.reconcile.service import Reconciler, RepairStatus
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.store.operations import NewOperation
from tests.integration.pipeline import Pipeline
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ALICE = Entity("Person", "Alice")
ACME = Entity("Company", "Acme")
GLOBEX = Entity("Company", "Globex")
BERLIN = Entity("City", "Berlin")
CAROL = Entity("Person", "Carol")  # no relation: a node that can go without taking edges along
DAVE = Entity("Person", "Dave")
INITECH = Entity("Company", "Initech")


def doc_v1(p: Pipeline, space: str = "it", document_id: str = "doc-1") -> IngestionPlan:
    return sample_plan(
        space,
        document_id,
        "Alice works at Acme in Berlin. Carol was there.",
        [ALICE, ACME, BERLIN, CAROL],
        [Relation(ALICE, "WORKS_AT", ACME), Relation(ACME, "LOCATED_IN", BERLIN)],
        graph=p.graph,
    )


def doc_v2(p: Pipeline, previous: DocumentState) -> IngestionPlan:
    return sample_plan(
        previous.space,
        previous.document_id,
        "Alice works at Globex in Berlin.",
        [ALICE, GLOBEX, BERLIN],
        [Relation(ALICE, "WORKS_AT", GLOBEX), Relation(GLOBEX, "LOCATED_IN", BERLIN)],
        previous=previous,
        graph=p.graph,
        dropped=[CAROL],  # only doc-1 mentioned her (Acme: another document may still list it)
    )


def other_doc(p: Pipeline, space: str = "it", document_id: str = "doc-2") -> IngestionPlan:
    return sample_plan(
        space,
        document_id,
        "Dave works at Initech.",
        [DAVE, INITECH],
        [Relation(DAVE, "WORKS_AT", INITECH)],
        graph=p.graph,
    )


def applied(p: Pipeline, *plans: IngestionPlan) -> None:
    """Publish the plans one after the other, each once the previous one completed."""
    for plan in plans:
        p.publish(plan)
        p.wait_stage(plan.operation_id, Stage.COMPLETED)


def reconcile(p: Pipeline, *args: str) -> Result:
    return CliRunner(env=p.env()).invoke(cli, ["reconcile", *args])


def reconcile_json(p: Pipeline, *args: str) -> tuple[int, dict[str, Any]]:
    result = reconcile(p, *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def edge_json(key: EdgeKey) -> dict[str, Any]:
    return {"src": key.src, "type": key.type, "dst": key.dst, "rank": key.rank}


def cypher(p: Pipeline, query: str, **params: Any) -> None:
    with p._driver() as driver:
        driver.execute_query(query, params)


def delete_node(p: Pipeline, node_id: str) -> None:
    cypher(p, f"MATCH (n:`{p.graph.node_label}` {{node_id: $id}}) DETACH DELETE n", id=node_id)


def delete_edge(p: Pipeline, key: EdgeKey) -> None:
    label = p.graph.node_label
    cypher(
        p,
        f"MATCH (:`{label}` {{node_id: $src}})-[r:`{key.type}` {{rank: $rank}}]->"
        f"(:`{label}` {{node_id: $dst}}) DELETE r",
        src=key.src,
        dst=key.dst,
        rank=key.rank,
    )


def create_edge(p: Pipeline, key: EdgeKey) -> None:
    label = p.graph.node_label
    cypher(
        p,
        f"MATCH (a:`{label}` {{node_id: $src}}), (b:`{label}` {{node_id: $dst}}) "
        f"MERGE (a)-[:`{key.type}` {{rank: $rank}}]->(b)",
        src=key.src,
        dst=key.dst,
        rank=key.rank,
    )


def planned(*plans: IngestionPlan) -> tuple[set[str], set[EdgeKey]]:
    return (
        {n for plan in plans for n in plan.next_state.node_ids},
        {k for plan in plans for k in plan.next_state.edge_keys},
    )


def bookkeeping(p: Pipeline) -> list[tuple[Any, ...]]:
    return (
        p.sql(
            "SELECT o.operation_id, o.stage, o.sequence, d.revision FROM operations AS o "
            "LEFT JOIN document_states AS d USING (space, document_id) ORDER BY o.operation_id"
        )
        + p.sql("SELECT count(*) FROM outbox")
        + p.sql("SELECT count(*) FROM document_history")
    )


def test_a_node_and_an_edge_deleted_behind_the_pipelines_back_are_reported_then_repaired(
    pipeline: Pipeline,
) -> None:
    # Given two documents applied by the pipeline, and a graph that matches them
    pipeline.start_applier()
    doc1, doc2 = doc_v1(pipeline), other_doc(pipeline)
    applied(pipeline, doc1, doc2)
    clean = reconcile(pipeline)
    assert clean.exit_code == ExitCode.OK, clean.output
    assert clean.output.strip() == "checked 2 document(s): no drift"
    before = bookkeeping(pipeline)
    # When a node and an edge of doc-1 are deleted in Neo4j behind the pipeline's back
    carol = CAROL.node_id("it")
    works_at = EdgeKey(src=ALICE.node_id("it"), type="WORKS_AT", dst=ACME.node_id("it"))
    delete_node(pipeline, carol)
    delete_edge(pipeline, works_at)
    # Then reconcile reports exactly those two, for doc-1 only, and exits 1
    text = reconcile(pipeline)
    assert text.exit_code == ExitCode.ERROR, text.output
    lines = text.output.strip().splitlines()
    assert len(lines) == 3, text.output  # header, doc-1, summary
    assert lines[1].split()[:5] == ["it/doc-1", "1", "1", "1", "0"]
    assert carol in lines[1] and str(works_at) in lines[1]
    code, report = reconcile_json(pipeline)
    assert code == ExitCode.ERROR
    assert report["drift"] is True
    assert report["scan"]["checked"] == 2
    assert report["scan"]["documents"] == [
        {
            "space": "it",
            "document_id": "doc-1",
            "revision": 1,
            "operation_id": doc1.operation_id,
            "missing_nodes": [carol],
            "missing_edges": [edge_json(works_at)],
            "unexpected_edges": [],
            "in_flight": [],
        }
    ]
    # and reading changed nothing
    assert pipeline.graph_elements() == (
        planned(doc1, doc2)[0] - {carol},
        planned(doc1, doc2)[1] - {works_at},
    )
    # When it repairs
    code, repaired = reconcile_json(pipeline, "--repair")
    # Then both are back, the scan after the repair is clean and it exits 0
    assert code == ExitCode.OK, repaired
    assert [(r["document_id"], r["status"]) for r in repaired["repairs"]] == [("doc-1", "REPAIRED")]
    assert (repaired["repairs"][0]["restored_nodes"], repaired["repairs"][0]["restored_edges"]) == (
        1,
        1,
    )
    assert repaired["scan"]["drifted"] == 1
    assert repaired["rescan"]["drifted"] == 0 and repaired["drift"] is False
    assert pipeline.graph_elements() == planned(doc1, doc2)
    # with the node as the plan wrote it
    with pipeline._driver() as driver:
        records, _, _ = driver.execute_query(
            f"MATCH (n:`{pipeline.graph.node_label}` {{node_id: $id}}) RETURN n, labels(n) AS l",
            id=carol,
        )
    assert dict(records[0]["n"]) == {"node_id": carol, "name": "Carol", "space": "it"}
    assert set(records[0]["l"]) == {pipeline.graph.node_label, "Person"}
    # and the bookkeeping untouched (no new stage, event, history row or revision)
    assert bookkeeping(pipeline) == before
    again = reconcile(pipeline)
    assert again.exit_code == ExitCode.OK, again.output


def test_superseded_edges_back_in_the_graph_are_unexpected_unless_another_document_claims_them(
    pipeline: Pipeline,
) -> None:
    # Given doc-3 says Alice works at Acme, and doc-1 said so in v1 and no longer in v2
    pipeline.start_applier()
    doc3 = sample_plan(
        "it",
        "doc-3",
        "Alice works at Acme.",
        [ALICE, ACME],
        [Relation(ALICE, "WORKS_AT", ACME)],
        graph=pipeline.graph,
    )
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    applied(pipeline, doc3, v1, v2)
    works_at = EdgeKey(src=ALICE.node_id("it"), type="WORKS_AT", dst=ACME.node_id("it"))
    located = EdgeKey(src=ACME.node_id("it"), type="LOCATED_IN", dst=BERLIN.node_id("it"))
    assert {works_at, located} == set(v2.next_state.superseded_edge_keys)
    # v2 deleted the edge doc-3 still holds (the applier deletes superseded edges whoever else
    # claims them): reconcile finds it missing for doc-3, not unexpected for doc-1
    code, report = reconcile_json(pipeline)
    assert code == ExitCode.ERROR
    assert [
        (d["document_id"], d["missing_nodes"], d["missing_edges"], d["unexpected_edges"])
        for d in report["scan"]["documents"]
    ] == [("doc-3", [], [edge_json(works_at)], [])]
    # When it repairs, doc-3's edge is back and, claimed by doc-3, not unexpected for doc-1
    code, report = reconcile_json(pipeline, "--repair")
    assert code == ExitCode.OK, report
    assert works_at in pipeline.graph_elements()[1]
    # When a superseded edge nobody claims comes back behind the pipeline's back
    create_edge(pipeline, located)
    code, report = reconcile_json(pipeline)
    assert code == ExitCode.ERROR
    # (doc-1 superseded it; it also touches Acme, a node of doc-3's, which does not list it)
    assert [(d["document_id"], d["unexpected_edges"]) for d in report["scan"]["documents"]] == [
        ("doc-1", [edge_json(located)]),
        ("doc-3", [edge_json(located)]),
    ]
    # Then the repair deletes it and only it
    code, report = reconcile_json(pipeline, "--repair")
    assert code == ExitCode.OK, report
    assert report["repairs"][0]["removed_edges"] == 1
    _, edges = pipeline.graph_elements()
    assert located not in edges
    assert edges == planned(doc3, v2)[1]


def test_space_and_document_filters_limit_the_check_and_the_repair(pipeline: Pipeline) -> None:
    # Given drift in it/doc-1, it/doc-2 and other/doc-1
    pipeline.start_applier()
    plans = [doc_v1(pipeline), other_doc(pipeline), other_doc(pipeline, "other", "doc-1")]
    applied(pipeline, *plans)
    delete_node(pipeline, CAROL.node_id("it"))
    delete_node(pipeline, INITECH.node_id("it"))  # takes it/doc-2's only edge along
    delete_node(pipeline, DAVE.node_id("other"))

    def drifted(*args: str) -> list[tuple[str, str]]:
        code, report = reconcile_json(pipeline, *args)
        documents = [(d["space"], d["document_id"]) for d in report["scan"]["documents"]]
        assert code == (ExitCode.ERROR if documents else ExitCode.OK)
        return documents

    assert drifted() == [("it", "doc-1"), ("it", "doc-2"), ("other", "doc-1")]
    assert drifted("--space", "it") == [("it", "doc-1"), ("it", "doc-2")]
    assert drifted("--document", "doc-1") == [("it", "doc-1"), ("other", "doc-1")]
    assert drifted("--space", "other", "--document", "doc-1") == [("other", "doc-1")]
    assert drifted("--space", "nowhere") == []
    # the page size does not change what is found
    assert drifted("--page-size", "1") == drifted()
    # When only it/doc-2 is repaired
    code, report = reconcile_json(pipeline, "--space", "it", "--document", "doc-2", "--repair")
    assert code == ExitCode.OK, report
    assert [r["document_id"] for r in report["repairs"]] == ["doc-2"]
    # Then the others still drift
    assert drifted() == [("it", "doc-1"), ("other", "doc-1")]


def test_repair_skips_a_document_that_moved_on_or_has_an_operation_in_flight(
    pipeline: Pipeline, request: pytest.FixtureRequest
) -> None:
    pipeline.start_applier()
    v1 = doc_v1(pipeline)
    applied(pipeline, v1, other_doc(pipeline))
    delete_node(pipeline, CAROL.node_id("it"))
    delete_node(pipeline, DAVE.node_id("it"))
    graph = Neo4jGraphWriter(pipeline.settings.neo4j)  # the applier's writer is its own
    graph.start()
    request.addfinalizer(graph.close)
    reconciler = Reconciler(pipeline.store, graph)
    scan = reconciler.scan()
    stale = {d.document_id: d for d in scan.drifts}
    assert set(stale) == {"doc-1", "doc-2"}
    # When doc-1 moves on to v2 after the check, and doc-2 has a plan in flight
    applied(pipeline, doc_v2(pipeline, v1.next_state))
    pipeline.stop_workers()
    in_flight = sample_plan(
        "it",
        "doc-2",
        "Dave left.",
        [INITECH],
        [],
        previous=other_doc(pipeline).next_state,
        graph=pipeline.graph,
    )
    with pipeline.store.unit_of_work() as uow:
        uow.insert_operations(
            [
                NewOperation(
                    Operation.prepared(
                        operation_id=in_flight.operation_id,
                        space="it",
                        document_id="doc-2",
                        expected_revision=1,
                        fingerprint=in_flight.fingerprint,
                        at=in_flight.created_at,
                    ),
                    encode_plan(in_flight),
                )
            ]
        )
    graph_before = pipeline.graph_elements()
    # Then the repair writes nothing and says why
    outcomes = {o.document_id: o for o in reconciler.repair(list(stale.values()))}
    assert outcomes["doc-1"].status is RepairStatus.SKIPPED
    assert "moved on" in outcomes["doc-1"].detail
    assert outcomes["doc-2"].status is RepairStatus.SKIPPED
    assert in_flight.operation_id in outcomes["doc-2"].detail
    assert pipeline.graph_elements() == graph_before
    # and the scan marks doc-2's drift as possibly transient
    (drift,) = [d for d in reconciler.scan().drifts if d.document_id == "doc-2"]
    assert drift.in_flight == (in_flight.operation_id,)


def test_an_unreachable_neo4j_exits_unavailable(pipeline: Pipeline) -> None:
    env = {**pipeline.env(), "GRAPH_INGEST_NEO4J__URI": "bolt://127.0.0.1:9"}
    result = CliRunner(env=env).invoke(cli, ["reconcile"])
    assert result.exit_code == ExitCode.UNAVAILABLE, result.output
    assert "error [UNAVAILABLE]" in result.output


def test_an_edge_no_state_lists_around_a_documents_nodes_is_unexpected_and_repaired(
    pipeline: Pipeline,
) -> None:
    # Given doc-1 applied, and an edge between its nodes that no revision of it ever listed (what
    # a plan of another lineage leaves behind: not among the superseded edges either)
    pipeline.start_applier()
    v1 = doc_v1(pipeline)
    applied(pipeline, v1)
    ghost = EdgeKey(src=BERLIN.node_id("it"), type="ONCE_SAID", dst=ALICE.node_id("it"))
    create_edge(pipeline, ghost)
    # When reconcile checks the graph
    code, report = reconcile_json(pipeline)
    # Then the edge is unexpected for doc-1
    assert code == ExitCode.ERROR
    assert [(d["document_id"], d["unexpected_edges"]) for d in report["scan"]["documents"]] == [
        ("doc-1", [edge_json(ghost)])
    ]
    # and the repair deletes it and only it
    code, report = reconcile_json(pipeline, "--repair")
    assert code == ExitCode.OK, report
    assert pipeline.graph_elements() == planned(v1)


def test_a_node_no_state_lists_is_reported_as_unreferenced(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    applied(pipeline, doc_v1(pipeline))
    assert reconcile_json(pipeline)[0] == ExitCode.OK
    # When a node of the pipeline's label that no committed state lists is in the graph
    label = pipeline.graph.node_label
    cypher(pipeline, f"CREATE (:`{label}` {{node_id: 'orphan-1'}})")
    # Then a whole scan reports it, a scan of one document does not look for it
    code, report = reconcile_json(pipeline)
    assert code == ExitCode.ERROR
    assert report["scan"]["unreferenced_nodes"] == [
        {"database": "neo4j", "node_label": label, "node_id": "orphan-1"}
    ]
    assert reconcile_json(pipeline, "--document", "doc-1")[0] == ExitCode.OK
    text = reconcile(pipeline)
    assert "unreferenced node orphan-1" in text.output
