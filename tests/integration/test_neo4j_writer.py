"""The Neo4j graph writer against a real Neo4j (the test stack's), each test in its own label space."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import neo4j
import pytest

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph import cypher
from graph_ingest.graph.base import GraphWriter
from graph_ingest.graph.errors import GraphPreconditionFailed
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.settings import Settings
from graph_ingest.settings.neo4j import Neo4jSettings
from tests.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

Snapshot = tuple[dict[str, tuple[list[str], dict[str, Any]]], dict[tuple[Any, ...], dict[str, Any]]]


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver(stack_settings: Settings) -> Iterator[neo4j.Driver]:
    """An independent driver for setup, inspection and clean-up (not the code under test)."""
    settings = stack_settings.neo4j
    with neo4j.GraphDatabase.driver(settings.uri, auth=settings.auth()) as graph_driver:
        yield graph_driver


@pytest.fixture(scope="module")
def neo4j_settings(stack_settings: Settings) -> Neo4jSettings:
    return stack_settings.neo4j


@pytest.fixture
def writer(neo4j_settings: Neo4jSettings) -> Iterator[Neo4jGraphWriter]:
    graph_writer = Neo4jGraphWriter(neo4j_settings)
    graph_writer.start()
    yield graph_writer
    graph_writer.close()


@pytest.fixture
def label_space(driver: neo4j.Driver, neo4j_settings: Neo4jSettings) -> Iterator[LabelSpace]:
    space = LabelSpace(driver, neo4j_settings.database)
    yield space
    space.drop()


class LabelSpace:
    """Unique base labels for one test; removes their nodes and constraints afterwards."""

    def __init__(self, driver: neo4j.Driver, database: str) -> None:
        self.driver = driver
        self.database = database
        self.labels: list[str] = []

    def options(self) -> GraphOptions:
        label = f"T_{uuid.uuid4().hex}"
        self.labels.append(label)
        return GraphOptions(database=self.database, node_label=label)

    def query(self, cypher: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(cypher, params, database_=self.database)
        return records

    def snapshot(self, options: GraphOptions) -> Snapshot:
        label = options.node_label
        nodes = {
            r["id"]: (sorted(r["labels"]), r["props"])
            for r in self.query(
                f"MATCH (n:`{label}`) RETURN n.node_id AS id, labels(n) AS labels, "
                "properties(n) AS props"
            )
        }
        edges = {
            (r["src"], r["type"], r["dst"], r["rank"]): r["props"]
            for r in self.query(
                f"MATCH (a:`{label}`)-[r]->(b:`{label}`) RETURN a.node_id AS src, type(r) AS type, "
                "b.node_id AS dst, r.rank AS rank, properties(r) AS props"
            )
        }
        return nodes, edges

    def drop(self) -> None:
        with self.driver.session(database=self.database) as session:
            for label in self.labels:  # CALL ... IN TRANSACTIONS needs an implicit transaction
                session.run(
                    f"MATCH (n:`{label}`) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS"
                ).consume()
                session.run(f"DROP CONSTRAINT `{label}_node_id` IF EXISTS").consume()


def node(node_id: str, *labels: str, **props: Any) -> NodeUpsert:
    return NodeUpsert(node_id=node_id, labels=labels, properties=props)


def edge(src: str, type_: str, dst: str, rank: int = 0, **props: Any) -> EdgeUpsert:
    return EdgeUpsert(src=src, type=type_, dst=dst, rank=rank, properties=props)


def small_graph() -> Mutation:
    return Mutation(
        node_upserts=(
            node("ada", "Person", name="Ada Lovelace", born=1815, tags=["math", "poetry"]),
            node("charles", "Person", "Inventor", name="Charles Babbage"),
            node("engine", "Machine", name="Analytical Engine", built=False),
        ),
        edge_upserts=(
            edge("ada", "KNOWS", "charles", since=1833),
            edge("ada", "WROTE_ABOUT", "engine", weight=0.9),
            edge("ada", "WROTE_ABOUT", "engine", rank=1, note="second notes"),
            edge("charles", "DESIGNED", "engine"),
        ),
    )


# -- behaviour ---------------------------------------------------------------------------------


def test_writer_satisfies_the_protocol_and_construction_touches_no_network() -> None:
    graph_writer: GraphWriter = Neo4jGraphWriter(Neo4jSettings(uri="bolt://192.0.2.1:7687"))
    with pytest.raises(GraphIngestError) as caught:
        graph_writer.apply([(GraphOptions(), Mutation(node_deletes=("a",)))])
    assert caught.value.code is StatusCode.FAILED_PRECONDITION
    graph_writer.close()  # closing a writer never started is fine


def test_apply_creates_exactly_the_planned_nodes_and_edges(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()
    base = options.node_label

    writer.apply([(options, small_graph())])

    nodes, edges = label_space.snapshot(options)
    assert nodes == {
        "ada": (
            sorted([base, "Person"]),
            {
                "node_id": "ada",
                "name": "Ada Lovelace",
                "born": 1815,
                "tags": ["math", "poetry"],
            },
        ),
        "charles": (
            sorted([base, "Inventor", "Person"]),
            {"node_id": "charles", "name": "Charles Babbage"},
        ),
        "engine": (
            sorted([base, "Machine"]),
            {"node_id": "engine", "name": "Analytical Engine", "built": False},
        ),
    }
    assert edges == {
        ("ada", "KNOWS", "charles", 0): {"rank": 0, "since": 1833},
        ("ada", "WROTE_ABOUT", "engine", 0): {"rank": 0, "weight": 0.9},
        ("ada", "WROTE_ABOUT", "engine", 1): {"rank": 1, "note": "second notes"},
        ("charles", "DESIGNED", "engine", 0): {"rank": 0},
    }
    assert writer.count_elements(options) == (3, 4)
    constraints = label_space.query(
        "SHOW CONSTRAINTS YIELD name, labelsOrTypes, properties, type WHERE name = $name",
        name=f"{base}_node_id",
    )
    assert [(c["labelsOrTypes"], c["properties"], c["type"]) for c in constraints] == [
        ([base], ["node_id"], "UNIQUENESS")
    ]


def test_applying_the_same_mutation_twice_converges(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()
    batch = [(options, small_graph())]

    writer.apply(batch)
    first = label_space.snapshot(options)
    writer.apply(batch)

    assert label_space.snapshot(options) == first
    assert writer.count_elements(options) == (3, 4)


def test_properties_merge_and_none_removes_one(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()
    writer.apply([(options, Mutation(node_upserts=(node("a", x=1, y=2),)))])

    writer.apply([(options, Mutation(node_upserts=(node("a", x=None, z=3),)))])

    nodes, _ = label_space.snapshot(options)
    assert nodes["a"][1] == {"node_id": "a", "y": 2, "z": 3}


def test_deletes_of_absent_things_succeed(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()  # a label nobody has used yet
    absent = [
        (
            options,
            Mutation(
                node_deletes=("ghost",),
                edge_deletes=(EdgeKey(src="ghost", type="KNOWS", dst="other"),),
            ),
        ),
        (options, Mutation(node_deletes=("phantom",), detach_deleted_nodes=True)),
    ]

    writer.apply(absent)
    writer.apply(absent)

    assert writer.count_elements(options) == (0, 0)


def test_edge_with_a_missing_endpoint_fails_and_rolls_back_the_whole_batch(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given a graph that already holds something
    options = label_space.options()
    writer.apply([(options, small_graph())])
    before = label_space.snapshot(options)

    # When a batch changes it and, in another plan, names a node that does not exist
    batch = [
        (
            options,
            Mutation(
                node_upserts=(node("ada", name="changed"), node("new")),
                edge_upserts=(edge("new", "KNOWS", "ada"),),
                edge_deletes=(EdgeKey(src="ada", type="KNOWS", dst="charles"),),
            ),
        ),
        (options, Mutation(edge_upserts=(edge("ada", "KNOWS", "ghost", rank=7),))),
    ]
    with pytest.raises(GraphPreconditionFailed) as caught:
        writer.apply(batch)

    # Then it says which edge, and nothing of the batch was written
    assert caught.value.code is StatusCode.FAILED_PRECONDITION
    assert "(ada)-[:KNOWS#7]->(ghost)" in caught.value.message
    assert label_space.snapshot(options) == before


def test_missing_endpoint_in_a_later_chunk_rolls_back_earlier_chunks(
    neo4j_settings: Neo4jSettings, label_space: LabelSpace
) -> None:
    options = label_space.options()
    nodes = tuple(node(f"n{i:02d}") for i in range(10))
    edges = tuple(edge(f"n{i:02d}", "NEXT", f"n{i + 1:02d}") for i in range(10))  # n10 is missing

    with Neo4jGraphWriter(neo4j_settings, rows_per_statement=3) as small_statements:
        with pytest.raises(GraphPreconditionFailed, match=r"\(n09\)-\[:NEXT#0\]->\(n10\)"):
            small_statements.apply([(options, Mutation(node_upserts=nodes, edge_upserts=edges))])

        assert small_statements.count_elements(options) == (0, 0)
        small_statements.apply([(options, Mutation(node_upserts=nodes, edge_upserts=edges[:-1]))])
        assert small_statements.count_elements(options) == (10, 9)


def test_a_batch_of_several_mutations_in_one_call(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given a graph with an old edge and a node that later plans remove
    options = label_space.options()
    other = label_space.options()
    writer.apply(
        [
            (
                options,
                Mutation(
                    node_upserts=(node("a"), node("old")), edge_upserts=(edge("a", "R", "old"),)
                ),
            )
        ]
    )

    # When one call carries several plans, over two base labels
    writer.apply(
        [
            (
                options,
                Mutation(
                    node_upserts=(node("b", "Doc", v=1),), edge_upserts=(edge("a", "R", "b"),)
                ),
            ),
            (
                options,
                Mutation(
                    node_deletes=("old",),
                    edge_deletes=(EdgeKey(src="a", type="R", dst="old"),),
                ),
            ),
            (
                other,
                Mutation(node_upserts=(node("a"), node("b")), edge_upserts=(edge("b", "S", "a"),)),
            ),
            (
                options,
                Mutation(node_upserts=(node("c", "Doc"),), edge_upserts=(edge("b", "R", "c"),)),
            ),
        ]
    )

    # Then every plan is in, each in its own label space
    nodes, edges = label_space.snapshot(options)
    assert sorted(nodes) == ["a", "b", "c"]
    assert set(edges) == {("a", "R", "b", 0), ("b", "R", "c", 0)}
    assert nodes["b"][1] == {"node_id": "b", "v": 1}
    assert label_space.snapshot(other)[1] == {("b", "S", "a", 0): {"rank": 0}}
    assert writer.count_elements(other) == (2, 1)


def test_an_edge_delete_walks_neither_end_of_a_hub(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given a hub with 1,000 edges in and 1,000 out
    options, spokes = hub(writer, label_space)
    # When ten of its edges, the hub at either end, are deleted by the writer's own statement,
    # profiled (db hits do not depend on the machine's speed)
    deletes = Mutation(edge_deletes=hub_edges(spokes))
    (statement,) = cypher.build_statements([(options, deletes)], rows_per_statement=100)[
        options.database
    ]
    _, summary, _ = label_space.driver.execute_query(
        "PROFILE " + statement.query, {"rows": statement.rows}, database_=options.database
    )

    # Then they are gone, and no row walked the hub's relationships (a plan that seeks one end
    # and expands from it reads ~1,000 relationships for each row whose end is the hub)
    assert summary.counters.relationships_deleted == 10
    assert writer.count_elements(options) == (1001, 1990)
    assert _db_hits(summary.profile) < 1000


def test_finding_edges_walks_neither_end_of_a_hub(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given a hub with 1,000 edges in and 1,000 out
    options, spokes = hub(writer, label_space)
    # When reconcile's query asks for ten of its edges and one that is not there, profiled
    wanted = [*hub_edges(spokes), EdgeKey(src=spokes[0], type="R", dst=spokes[1])]
    records, summary, _ = label_space.driver.execute_query(
        "PROFILE " + cypher.existing_edges_query(options.node_label),
        {"rows": [key.model_dump() for key in wanted]},
        database_=options.database,
    )

    # Then it finds exactly the ten, without walking the hub's relationships
    assert {EdgeKey(**r.data()) for r in records} == set(wanted[:10])
    assert writer.find_elements(options, [], wanted) == (set(), set(wanted[:10]))
    assert _db_hits(summary.profile) < 1000


def hub(writer: Neo4jGraphWriter, label_space: LabelSpace) -> tuple[GraphOptions, list[str]]:
    """A label space holding a node ``hub`` with an edge ``R`` to and from each of 1,000 spokes."""
    options = label_space.options()
    spokes = [f"spoke-{i:04d}" for i in range(1000)]
    edges = [*(edge(s, "R", "hub") for s in spokes), *(edge("hub", "R", s) for s in spokes)]
    nodes = (node("hub"), *(node(s) for s in spokes))
    writer.apply([(options, Mutation(node_upserts=nodes, edge_upserts=tuple(edges)))])
    return options, spokes


def hub_edges(spokes: list[str]) -> tuple[EdgeKey, ...]:
    """Ten of the hub's edges: five into it, five out of it."""
    return (
        *(EdgeKey(src=s, type="R", dst="hub") for s in spokes[:5]),
        *(EdgeKey(src="hub", type="R", dst=s) for s in spokes[5:10]),
    )


def _db_hits(profile: dict[str, Any] | None) -> int:
    assert profile is not None, "PROFILE returned no profile"
    return int(profile.get("dbHits", 0)) + sum(_db_hits(c) for c in profile.get("children", []))


def test_node_delete_without_detach_fails_clearly_and_with_detach_succeeds(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()
    writer.apply([(options, small_graph())])
    before = label_space.snapshot(options)

    with pytest.raises(GraphPreconditionFailed, match="still have relationships") as caught:
        writer.apply([(options, Mutation(node_deletes=("engine", "nobody")))])
    assert "engine" in caught.value.message
    assert label_space.snapshot(options) == before

    writer.apply(
        [(options, Mutation(node_deletes=("engine", "nobody"), detach_deleted_nodes=True))]
    )

    nodes, edges = label_space.snapshot(options)
    assert sorted(nodes) == ["ada", "charles"]
    assert list(edges) == [("ada", "KNOWS", "charles", 0)]


def test_node_delete_without_detach_succeeds_once_its_edges_go_in_the_same_batch(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()
    writer.apply(
        [
            (
                options,
                Mutation(node_upserts=(node("a"), node("b")), edge_upserts=(edge("a", "R", "b"),)),
            )
        ]
    )

    writer.apply(
        [
            (
                options,
                Mutation(node_deletes=("b",), edge_deletes=(EdgeKey(src="a", type="R", dst="b"),)),
            )
        ]
    )

    assert writer.count_elements(options) == (1, 0)


def without_base_label(snapshot: Snapshot, options: GraphOptions) -> Snapshot:
    """The snapshot with the test's base label left out, to compare two label spaces."""
    nodes, edges = snapshot
    return (
        {
            node_id: ([label for label in labels if label != options.node_label], props)
            for node_id, (labels, props) in nodes.items()
        },
        edges,
    )


def test_a_batch_leaves_the_graph_that_its_plans_leave_applied_one_by_one(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given plans that upsert the same node and edge with other labels and properties (issue 10:
    # the {Person, Employee} group, first seen for M, ran first, so A's older title won)
    plans = [
        Mutation(node_upserts=(node("m", "Person", "Employee"),)),
        Mutation(
            node_upserts=(node("n", "Person", title="old", x=1), node("o")),
            edge_upserts=(edge("n", "KNOWS", "m", since=1, w=1),),
        ),
        Mutation(
            node_upserts=(node("n", "Person", "Employee", title="new", x=None),),
            edge_upserts=(edge("n", "KNOWS", "m", since=2, w=None), edge("o", "KNOWS", "n")),
        ),
        Mutation(node_upserts=(node("n", "Manager", y=3),)),
    ]
    batched, one_by_one = label_space.options(), label_space.options()

    # When one label space gets them as one batch, the other one plan at a time
    writer.apply([(batched, mutation) for mutation in plans])
    for mutation in plans:
        writer.apply([(one_by_one, mutation)])

    # Then both hold the same graph, in which the later plan won
    nodes, edges = without_base_label(label_space.snapshot(batched), batched)
    assert (nodes, edges) == without_base_label(label_space.snapshot(one_by_one), one_by_one)
    assert nodes["n"] == (
        ["Employee", "Manager", "Person"],
        {"node_id": "n", "title": "new", "y": 3},
    )
    assert edges[("n", "KNOWS", "m", 0)] == {"rank": 0, "since": 2}


def test_a_node_delete_sees_the_detach_deletes_of_earlier_plans_and_not_of_later_ones(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    # Given m-[R]->n, and w, x alone
    options = label_space.options()
    setup = Mutation(
        node_upserts=(node("w"), node("m"), node("n")), edge_upserts=(edge("m", "R", "n"),)
    )
    writer.apply([(options, setup)])
    delete_w = Mutation(node_deletes=("w",))
    detach_m = Mutation(node_deletes=("m",), detach_deleted_nodes=True)
    delete_n = Mutation(node_deletes=("n",))

    # When n's delete arrives before m's detach delete, it fails, as it does alone
    with pytest.raises(GraphPreconditionFailed, match="still have relationships"):
        writer.apply([(options, delete_n), (options, detach_m)])
    assert writer.count_elements(options) == (3, 1)

    # When it arrives after, it succeeds, as it does one plan at a time, even behind another
    # plan's non-detaching delete (which once put both plain deletes in one statement, first)
    writer.apply([(options, delete_w), (options, detach_m), (options, delete_n)])
    assert writer.count_elements(options) == (0, 0)


def test_a_value_neo4j_cannot_store_is_an_invalid_argument(
    writer: Neo4jGraphWriter, label_space: LabelSpace
) -> None:
    options = label_space.options()

    with pytest.raises(GraphIngestError) as caught:
        writer.apply([(options, Mutation(node_upserts=(node("a", mixed=[1, "one"]),)))])

    assert caught.value.code is StatusCode.INVALID_ARGUMENT
    assert isinstance(caught.value.__cause__, neo4j.exceptions.Neo4jError)
    assert writer.count_elements(options) == (0, 0)


def test_unreachable_server_is_dependency_unavailable() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    graph_writer = Neo4jGraphWriter(
        Neo4jSettings(uri=f"bolt://127.0.0.1:{port}", connection_timeout_s=2.0)
    )

    with pytest.raises(DependencyUnavailable) as caught:
        graph_writer.start()

    assert caught.value.code is StatusCode.UNAVAILABLE
    assert caught.value.__cause__ is not None
    graph_writer.close()


def test_server_lost_after_start_is_dependency_unavailable(
    neo4j_settings: Neo4jSettings, label_space: LabelSpace
) -> None:
    # Given a writer connected through a proxy, its constraint in place
    options = label_space.options()
    target = urlsplit(neo4j_settings.uri)
    proxy = TcpProxy((target.hostname or "127.0.0.1", target.port or 7687))
    proxy.start()
    proxied = neo4j_settings.model_copy(
        update={"uri": f"bolt://127.0.0.1:{proxy.port}", "connection_timeout_s": 1.0}
    )
    with Neo4jGraphWriter(proxied, max_retry_time_s=0.5) as graph_writer:
        graph_writer.ensure_constraints(options)
        # When the server goes away
        proxy.cut()

        # Then apply says UNAVAILABLE (so a circuit breaker can pause, not dead-letter)
        with pytest.raises(DependencyUnavailable) as caught:
            graph_writer.apply([(options, Mutation(node_deletes=("a",)))])
        assert caught.value.code is StatusCode.UNAVAILABLE
