"""The planned-state overlay: bounded, forgettable, and it knows what other documents list."""

from __future__ import annotations

import pytest

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.state import DocumentState
from graph_ingest.planning.planned_states import PlannedStates

pytestmark = pytest.mark.timeout(30)

E = EdgeKey(src="a", type="KNOWS", dst="b")


def state(doc: str, revision: int = 1, nodes: tuple[str, ...] = ("a", "b")) -> DocumentState:
    return DocumentState(
        space="kb",
        document_id=doc,
        revision=revision,
        operation_id=f"op-{doc}-{revision}",
        content_hash="sha256:0",
        document_version="1",
        node_ids=nodes,
        edge_keys=(E,) if nodes else (),
    )


def test_other_documents_listings_are_indexed_and_follow_remember_and_forget() -> None:
    planned = PlannedStates()
    planned.remember(state("x"))
    planned.remember(state("y"))

    assert planned.edges_listed_by_others(("kb", "x"), [E]) == {E}
    planned.remember(state("y", revision=2, nodes=()))  # y's next version lists nothing
    assert planned.edges_listed_by_others(("kb", "x"), [E]) == set()
    assert planned.nodes_listed_by_others(("kb", "y"), ["a", "z"]) == {"a"}
    planned.forget([("kb", "x")])
    assert planned.nodes_listed_by_others(("kb", "y"), ["a"]) == set()
    assert planned.get(("kb", "x")) is None
    assert planned.get(("kb", "y")) == state("y", revision=2, nodes=())


def test_the_least_recently_planned_document_goes_first_past_the_capacity() -> None:
    planned = PlannedStates(capacity=2)
    for doc in ("x", "y"):
        planned.remember(state(doc))
    planned.remember(state("x", revision=2))  # x planned again: y is now the oldest

    planned.remember(state("z"))

    assert len(planned) == 2
    assert planned.get(("kb", "y")) is None
    assert planned.nodes_listed_by_others(("kb", "z"), ["a"]) == {"a"}  # x still lists it
    with pytest.raises(ValueError, match="capacity"):
        PlannedStates(capacity=0)
