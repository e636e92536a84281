"""The pure Cypher builder: grouping, order, chunking, identifier guard. No database."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from graph_ingest.domain.errors import InvalidIdentifier
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph import cypher
from graph_ingest.graph.cypher import Statement, StatementKind, build_statements
from graph_ingest.graph.errors import GraphInvalidArgument

ENTITY = GraphOptions()
OTHER_LABEL = GraphOptions(node_label="Other")
OTHER_DB = GraphOptions(database="archive")

BAD_IDENTIFIERS = ["a-b", "x) DETACH DELETE n //", "", "`x`", "1abc", "a b", "é"]


def node(node_id: str, *labels: str, **props: object) -> NodeUpsert:
    return NodeUpsert(node_id=node_id, labels=labels, properties=props)


def edge(src: str, type_: str, dst: str, rank: int = 0, **props: object) -> EdgeUpsert:
    return EdgeUpsert(src=src, type=type_, dst=dst, rank=rank, properties=props)


def kinds(statements: list[Statement]) -> list[StatementKind]:
    return [s.kind for s in statements]


def test_empty_batch_and_empty_mutations_build_nothing() -> None:
    assert build_statements([], rows_per_statement=10) == {}
    assert (
        build_statements([(ENTITY, Mutation()), (OTHER_DB, Mutation())], rows_per_statement=10)
        == {}
    )


def test_order_is_edge_deletes_node_deletes_node_upserts_edge_upserts_across_the_batch() -> None:
    # Given two plans, each with every kind of change
    first = Mutation(
        node_upserts=(node("a"), node("b")),
        edge_upserts=(edge("a", "KNOWS", "b"),),
        node_deletes=("x",),
        edge_deletes=(EdgeKey(src="a", type="OLD", dst="x"),),
        detach_deleted_nodes=True,
    )
    second = Mutation(
        node_upserts=(node("c"),),
        edge_upserts=(edge("c", "KNOWS", "a"),),
        node_deletes=("y",),
        edge_deletes=(EdgeKey(src="c", type="OLD", dst="y"),),
        detach_deleted_nodes=True,
    )

    # When
    statements = build_statements([(ENTITY, first), (ENTITY, second)], rows_per_statement=100)

    # Then: one statement per kind, rows of both plans together, in apply order
    assert list(statements) == ["neo4j"]
    neo = statements["neo4j"]
    assert kinds(neo) == [
        StatementKind.EDGE_DELETE,
        StatementKind.NODE_DELETE,
        StatementKind.NODE_UPSERT,
        StatementKind.EDGE_UPSERT,
    ]
    assert neo[0].rows == [
        {"src": "a", "dst": "x", "rank": 0},
        {"src": "c", "dst": "y", "rank": 0},
    ]
    assert neo[1].rows == ["x", "y"]
    assert [r["id"] for r in neo[2].rows] == ["a", "b", "c"]
    assert [(r["src"], r["dst"]) for r in neo[3].rows] == [("a", "b"), ("c", "a")]


def test_node_upserts_group_by_base_label_and_sorted_extra_labels() -> None:
    mutation = Mutation(
        node_upserts=(
            node("p1", "Person", "Agent"),
            node("p2", "Agent", "Person", "Entity"),  # base label in labels: not repeated
            node("o1", "Org"),
            node("n1"),
        )
    )
    other = Mutation(node_upserts=(node("p3", "Person", "Agent"),))

    statements = build_statements(
        [(ENTITY, mutation), (OTHER_LABEL, other)], rows_per_statement=100
    )

    by_query = {s.query: [r["id"] for r in s.rows] for s in statements["neo4j"]}
    assert by_query == {
        cypher.node_upsert_query("Entity", ["Agent", "Person"]): ["p1", "p2"],
        cypher.node_upsert_query("Entity", ["Org"]): ["o1"],
        cypher.node_upsert_query("Entity", []): ["n1"],
        cypher.node_upsert_query("Other", ["Agent", "Person"]): ["p3"],
    }


def test_node_upsert_query_text() -> None:
    assert cypher.node_upsert_query("Entity", ["Agent", "Person"]) == (
        "CYPHER replan=skip UNWIND $rows AS row MERGE (n:`Entity` {node_id: row.id}) "
        "SET n += row.props SET n:`Agent`:`Person`"
    )
    assert cypher.node_upsert_query("Entity", []) == (
        "CYPHER replan=skip UNWIND $rows AS row MERGE (n:`Entity` {node_id: row.id}) "
        "SET n += row.props"
    )


def test_edge_queries_text() -> None:
    assert cypher.edge_upsert_query("Entity", "KNOWS") == (
        "CYPHER replan=skip UNWIND $rows AS row MATCH (a:`Entity` {node_id: row.src}) "
        "MATCH (b:`Entity` {node_id: row.dst}) "
        "MERGE (a)-[r:`KNOWS` {rank: row.rank}]->(b) SET r += row.props RETURN count(r) AS merged"
    )
    assert cypher.edge_delete_query("Entity", "KNOWS") == (
        "CYPHER replan=skip UNWIND $rows AS row MATCH (a:`Entity` {node_id: row.src}) "
        "MATCH (b:`Entity` {node_id: row.dst}) "
        "CALL (a, b, row) { MATCH (a)-[r:`KNOWS` {rank: row.rank}]->(b) DELETE r }"
    )
    assert cypher.constraint_query("Entity") == (
        "CREATE CONSTRAINT `Entity_node_id` IF NOT EXISTS "
        "FOR (n:`Entity`) REQUIRE n.node_id IS UNIQUE"
    )


def test_node_deletes_group_by_detach_and_carry_a_check_when_not_detaching() -> None:
    detach = Mutation(node_deletes=("a",), detach_deleted_nodes=True)
    keep = Mutation(node_deletes=("b", "c"))

    statements = build_statements([(ENTITY, detach), (ENTITY, keep)], rows_per_statement=100)

    deletes = statements["neo4j"]
    assert [(s.query.endswith("DETACH DELETE n"), s.rows) for s in deletes] == [
        (True, ["a"]),
        (False, ["b", "c"]),
    ]
    assert deletes[0].check is None
    assert deletes[1].check == cypher.linked_nodes_query("Entity")


def test_edge_upserts_group_by_base_label_and_type_and_keep_properties() -> None:
    mutation = Mutation(
        edge_upserts=(
            edge("a", "KNOWS", "b", weight=0.5),
            edge("a", "LIKES", "b"),
            edge("a", "KNOWS", "b", rank=1, since=None),
        )
    )

    statements = build_statements([(ENTITY, mutation)], rows_per_statement=100)

    upserts = statements["neo4j"]
    assert [s.query for s in upserts] == [
        cypher.edge_upsert_query("Entity", "KNOWS"),
        cypher.edge_upsert_query("Entity", "LIKES"),
    ]
    assert upserts[0].rows == [
        {"src": "a", "dst": "b", "rank": 0, "props": {"weight": 0.5}},
        {"src": "a", "dst": "b", "rank": 1, "props": {"since": None}},
    ]
    assert [s.check for s in upserts] == [
        cypher.missing_endpoints_query("Entity", "KNOWS"),
        cypher.missing_endpoints_query("Entity", "LIKES"),
    ]


def test_databases_are_separate() -> None:
    statements = build_statements(
        [
            (ENTITY, Mutation(node_upserts=(node("a"),))),
            (OTHER_DB, Mutation(node_upserts=(node("b"),))),
        ],
        rows_per_statement=100,
    )
    assert {db: [s.rows[0]["id"] for s in st] for db, st in statements.items()} == {
        "neo4j": ["a"],
        "archive": ["b"],
    }


@pytest.mark.parametrize(
    ("rows", "size", "expected"), [(5, 2, [2, 2, 1]), (4, 2, [2, 2]), (3, 10, [3]), (1, 1, [1])]
)
def test_chunking(rows: int, size: int, expected: list[int]) -> None:
    mutation = Mutation(
        node_upserts=tuple(node(f"n{i}") for i in range(rows)),
        edge_upserts=tuple(edge("n0", "R", "n0", rank=i) for i in range(rows)),
        node_deletes=tuple(f"d{i}" for i in range(rows)),
        edge_deletes=tuple(EdgeKey(src="x", type="R", dst="y", rank=i) for i in range(rows)),
    )

    statements = build_statements([(ENTITY, mutation)], rows_per_statement=size)["neo4j"]

    for kind in StatementKind:
        assert [len(s.rows) for s in statements if s.kind is kind] == expected, kind
    all_nodes = [r["id"] for s in statements if s.kind is StatementKind.NODE_UPSERT for r in s.rows]
    assert sorted(all_nodes) == sorted(f"n{i}" for i in range(rows))


def test_rows_per_statement_must_be_positive() -> None:
    with pytest.raises(ValueError):
        build_statements([], rows_per_statement=0)


def node_rows(statements: list[Statement]) -> dict[str, tuple[str, dict[str, object]]]:
    """Node id -> (query, properties) over every node upsert statement."""
    return {
        row["id"]: (s.query, row["props"])
        for s in statements
        if s.kind is StatementKind.NODE_UPSERT
        for row in s.rows
    }


def test_the_later_upsert_of_a_node_wins_whatever_labels_either_plan_gives_it() -> None:
    # Issue 10: the group {Person, Employee} was seen first (for M), so it ran first and A's
    # older title, in the {Person} group, overwrote B's.
    c = Mutation(node_upserts=(node("m", "Person", "Employee"),))
    a = Mutation(node_upserts=(node("n", "Person", title="old"),))
    b = Mutation(node_upserts=(node("n", "Person", "Employee", title="new"),))

    statements = build_statements([(ENTITY, c), (ENTITY, a), (ENTITY, b)], rows_per_statement=10)

    employees = cypher.node_upsert_query("Entity", ["Employee", "Person"])
    assert node_rows(statements["neo4j"]) == {
        "m": (employees, {}),
        "n": (employees, {"title": "new"}),
    }


def test_upserts_of_one_node_merge_in_batch_order_into_one_row() -> None:
    # labels add up; properties update in order, and a later None still removes the property
    earlier = Mutation(node_upserts=(node("z"), node("a", "Doc", v=1, w=1, x=1)))
    later = Mutation(node_upserts=(node("a", "Tag", v=2, w=None),))
    latest = Mutation(node_upserts=(node("a", x=3),))

    statements = build_statements(
        [(ENTITY, earlier), (ENTITY, later), (ENTITY, latest)], rows_per_statement=10
    )["neo4j"]

    assert node_rows(statements) == {
        "a": (cypher.node_upsert_query("Entity", ["Doc", "Tag"]), {"v": 2, "w": None, "x": 3}),
        "z": (cypher.node_upsert_query("Entity", []), {}),
    }
    assert earlier.node_upserts[1].properties == {"v": 1, "w": 1, "x": 1}  # plans untouched


def test_upserts_of_one_edge_merge_in_batch_order_into_one_row() -> None:
    earlier = Mutation(edge_upserts=(edge("a", "R", "b", w=1, x=1), edge("a", "R", "b", rank=1)))
    later = Mutation(edge_upserts=(edge("a", "R", "b", w=2, x=None),))

    statements = build_statements([(ENTITY, earlier), (ENTITY, later)], rows_per_statement=10)

    assert [s.rows for s in statements["neo4j"]] == [
        [
            {"src": "a", "dst": "b", "rank": 0, "props": {"w": 2, "x": None}},
            {"src": "a", "dst": "b", "rank": 1, "props": {}},
        ]
    ]


def test_node_deletes_run_in_batch_order_when_plans_alternate_detaching_and_not() -> None:
    # A detach delete removes edges no plan names; a later plan's "still linked?" check must see
    # that, an earlier plan's must not. So the runs keep batch order.
    batch = [
        (ENTITY, Mutation(node_deletes=("w",))),
        (ENTITY, Mutation(node_deletes=("x",))),
        (ENTITY, Mutation(node_deletes=("m",), detach_deleted_nodes=True)),
        (OTHER_LABEL, Mutation(node_deletes=("o",))),
        (ENTITY, Mutation(node_deletes=("n",))),
    ]

    statements = build_statements(batch, rows_per_statement=10)["neo4j"]

    detached = cypher.node_delete_query("Entity", detach=True)
    kept = cypher.node_delete_query("Entity", detach=False)
    assert [(s.query, s.rows) for s in statements] == [
        (kept, ["w", "x"]),
        (detached, ["m"]),
        (kept, ["n"]),
        (cypher.node_delete_query("Other", detach=False), ["o"]),
    ]


@pytest.mark.parametrize("bad", BAD_IDENTIFIERS)
def test_every_query_builder_rejects_a_bad_label(bad: str) -> None:
    builders: list[Callable[[], str]] = [
        lambda: cypher.node_upsert_query(bad, []),
        lambda: cypher.node_upsert_query("Entity", ["Ok", bad]),
        lambda: cypher.edge_upsert_query(bad, "R"),
        lambda: cypher.missing_endpoints_query(bad, "R"),
        lambda: cypher.edge_delete_query(bad, "R"),
        lambda: cypher.node_delete_query(bad, detach=True),
        lambda: cypher.linked_nodes_query(bad),
        lambda: cypher.constraint_query(bad),
        lambda: cypher.count_nodes_query(bad),
        lambda: cypher.count_relationships_query(bad),
    ]
    for build in builders:
        with pytest.raises(InvalidIdentifier) as caught:
            build()
        assert caught.value.code is StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("bad", BAD_IDENTIFIERS)
def test_every_query_builder_rejects_a_bad_edge_type(bad: str) -> None:
    for build in (
        cypher.edge_upsert_query,
        cypher.missing_endpoints_query,
        cypher.edge_delete_query,
    ):
        with pytest.raises(InvalidIdentifier):
            build("Entity", bad)


@pytest.mark.parametrize("bad", BAD_IDENTIFIERS)
def test_the_builder_is_safe_on_its_own_even_with_unvalidated_models(bad: str) -> None:
    # model_construct skips the models' validation: the builder must still refuse.
    label = NodeUpsert.model_construct(node_id="a", labels=(bad,), properties={})
    edge_type = EdgeUpsert.model_construct(src="a", type=bad, dst="b", rank=0, properties={})
    edge_key = EdgeKey.model_construct(src="a", type=bad, dst="b", rank=0)
    base = GraphOptions.model_construct(database="neo4j", node_label=bad)
    database = GraphOptions.model_construct(database=bad, node_label="Entity")
    cases = [
        (ENTITY, Mutation.model_construct(node_upserts=(label,))),
        (ENTITY, Mutation.model_construct(edge_upserts=(edge_type,))),
        (ENTITY, Mutation.model_construct(edge_deletes=(edge_key,))),
        (base, Mutation(node_deletes=("a",))),
        (database, Mutation(node_deletes=("a",))),
    ]
    for options, mutation in cases:
        with pytest.raises(InvalidIdentifier):
            build_statements([(options, mutation)], rows_per_statement=10)


def test_reserved_property_names_are_refused() -> None:
    with pytest.raises(GraphInvalidArgument, match="node_id"):
        build_statements(
            [
                (
                    ENTITY,
                    Mutation(node_upserts=(NodeUpsert(node_id="a", properties={"node_id": "b"}),)),
                )
            ],
            rows_per_statement=10,
        )
    with pytest.raises(GraphInvalidArgument, match="rank") as caught:
        ranked = EdgeUpsert(src="a", type="R", dst="b", properties={"rank": 3})
        build_statements([(ENTITY, Mutation(edge_upserts=(ranked,)))], rows_per_statement=10)
    assert caught.value.code is StatusCode.INVALID_ARGUMENT


def test_values_never_enter_query_text() -> None:
    hostile = "x'}) DETACH DELETE n //"
    mutation = Mutation(
        node_upserts=(node(hostile, name=hostile),),
        edge_upserts=(edge(hostile, "R", hostile, note=hostile),),
        node_deletes=(hostile + "2",),
        edge_deletes=(EdgeKey(src=hostile, type="R", dst=hostile, rank=7),),
    )

    statements = build_statements([(ENTITY, mutation)], rows_per_statement=10)["neo4j"]

    assert all(
        hostile not in s.query and (s.check is None or hostile not in s.check) for s in statements
    )
