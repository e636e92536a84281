"""The reads the planner makes of PostgresOperationStore, on a real PostgreSQL: registry lookups
and which edges and nodes other documents' committed states still list."""

from __future__ import annotations

import pytest

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.state import DocumentState, EntityRegistration
from graph_ingest.store.postgres.store import PostgresOperationStore
from tests.integration.test_postgres_store import SPACE, pg, reg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
__all__ = ["pg", "store"]  # the fixtures of test_postgres_store: a schema of each test's own

E_AB = EdgeKey(src="a", type="KNOWS", dst="b")
E_BC = EdgeKey(src="b", type="KNOWS", dst="c")
E_AB_RANK_1 = EdgeKey(src="a", type="KNOWS", dst="b", rank=1)


def listing(
    doc: str, nodes: tuple[str, ...], edges: tuple[EdgeKey, ...], space: str = SPACE
) -> DocumentState:
    return DocumentState(
        space=space,
        document_id=doc,
        revision=1,
        operation_id=f"op-{space}-{doc}",
        content_hash=f"sha256:{doc}",
        document_version="1",
        node_ids=nodes,
        edge_keys=edges,
    )


def test_registry_lookup_finds_bound_names_of_one_space_in_one_read(
    store: PostgresOperationStore,
) -> None:
    other_space = EntityRegistration(
        space="elsewhere",
        entity_type="Person",
        name="Alice",
        normalized_name="alice",
        node_id="n-alice-elsewhere",
    )
    with store.unit_of_work() as uow:
        uow.register_entities(
            [
                reg("Alice", "n-alice", "Al"),
                reg("Al", "n-alice"),
                reg("Acme", "n-acme", entity_type="Company"),
                other_space,
            ]
        )

    found = store.registry_lookup(
        SPACE,
        [
            ("Person", "alice"),
            ("Person", "al"),
            ("Person", "acme"),  # registered under another type
            ("Company", "acme"),
            ("Person", "bob"),
            ("Person", "alice"),
        ],
    )

    assert found == {
        ("Person", "alice"): "n-alice",
        ("Person", "al"): "n-alice",
        ("Company", "acme"): "n-acme",
    }
    assert store.registry_lookup("elsewhere", [("Person", "alice")]) == {
        ("Person", "alice"): "n-alice-elsewhere"
    }
    assert store.registry_lookup(SPACE, []) == {}


def test_claimed_edges_and_nodes_are_those_other_documents_list(
    store: PostgresOperationStore,
) -> None:
    with store.unit_of_work() as uow:
        uow.commit_document_states(
            [
                listing("a", ("a", "b", "c"), (E_AB, E_BC)),
                listing("b", ("a", "b"), (E_AB,)),
                listing("x", ("c",), (E_BC,), space="elsewhere"),
            ]
        )
    doc_a, doc_b = (SPACE, "a"), (SPACE, "b")

    claimed_edges = store.claimed_edges(
        [(doc_a, E_AB), (doc_a, E_BC), (doc_a, E_AB_RANK_1), (doc_b, E_AB)]
    )
    claimed_nodes = store.claimed_nodes(
        [(doc_a, "a"), (doc_a, "c"), (doc_b, "b"), (doc_b, "c"), (doc_b, "z")]
    )

    # doc b lists a->b; only another space's document lists b->c (its nodes are the same nodes:
    # node ids, not spaces, identify nodes in the graph); a rank is part of an edge's identity
    assert claimed_edges == {(doc_a, E_AB), (doc_a, E_BC), (doc_b, E_AB)}
    assert claimed_nodes == {(doc_a, "a"), (doc_a, "c"), (doc_b, "b"), (doc_b, "c")}
    assert store.claimed_nodes([]) == set()
