import itertools

import pytest
from pydantic import ValidationError

from graph_ingest.domain.errors import IllegalTransition, InvalidIdentifier
from graph_ingest.domain.identifiers import validate_identifier
from graph_ingest.domain.ids import derive_operation_id
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.stages import LEGAL_TRANSITIONS, Stage, check_transition
from graph_ingest.domain.state import DocumentState, normalize_name
from tests.samples import Entity, sample_plan
from tests.unit.plans import plan_for

ALICE = Entity("Person", "Alice")
BOB = Entity("Person", "Bob")


@pytest.mark.parametrize("bad", ["a-b", "x) DETACH DELETE n //", "", "1abc", "a b", "a`b", "é"])
def test_identifier_validation_rejects_unsafe_names(bad: str) -> None:
    with pytest.raises(InvalidIdentifier):
        validate_identifier(bad)


@pytest.mark.parametrize("good", ["Person", "_x", "WORKS_AT", "a1"])
def test_identifier_validation_accepts_safe_names(good: str) -> None:
    assert validate_identifier(good) == good


@pytest.mark.parametrize(
    "build",
    [
        lambda: NodeUpsert(node_id="n", labels=("a-b",)),
        lambda: NodeUpsert(node_id="n", properties={"x) DETACH DELETE n //": 1}),
        lambda: EdgeUpsert(src="a", type="", dst="b"),
        lambda: EdgeUpsert(src="a", type="T", dst="b", properties={"bad name": 1}),
    ],
)
def test_models_reject_unsafe_identifiers(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError):
        build()


def test_mutation_rejects_duplicate_identities_and_upsert_plus_delete() -> None:
    with pytest.raises(ValidationError, match="duplicate node upsert"):
        Mutation(node_upserts=(NodeUpsert(node_id="n"), NodeUpsert(node_id="n")))
    with pytest.raises(ValidationError, match="both upserted and deleted"):
        Mutation(node_upserts=(NodeUpsert(node_id="n"),), node_deletes=("n",))


# Two different edges whose ids hold the punctuation of an edge printed as text: printed, they
# read the same ("(x)-[:T#0]->(y)-[:T#0]->(z)"); compared as identities, they differ.
LOOKALIKE_EDGES = (
    {"src": "x)-[:T#0]->(y", "type": "T", "dst": "z"},
    {"src": "x", "type": "T", "dst": "y)-[:T#0]->(z"},
)
REPEATED_EDGE = {"src": "a", "type": "KNOWS", "dst": "b", "rank": 2}


def state_with(**edge_keys: tuple[EdgeKey, ...]) -> DocumentState:
    return DocumentState(
        space="s",
        document_id="d",
        revision=1,
        operation_id="op",
        content_hash="h",
        document_version="v1",
        **edge_keys,
    )


def test_edges_that_print_alike_are_not_duplicates() -> None:
    ids = ("x", "z", "x)-[:T#0]->(y", "y)-[:T#0]->(z")
    mutation = Mutation(
        node_upserts=tuple(NodeUpsert(node_id=i) for i in ids),
        edge_upserts=tuple(EdgeUpsert(**e) for e in LOOKALIKE_EDGES),
        edge_deletes=tuple(EdgeKey(**e) for e in LOOKALIKE_EDGES),
    )
    assert len(mutation.edge_upserts) == len(mutation.edge_deletes) == 2
    assert len(state_with(edge_keys=tuple(EdgeKey(**e) for e in LOOKALIKE_EDGES)).edge_keys) == 2


def test_a_repeated_edge_is_a_duplicate_named_in_the_error() -> None:
    upsert, key = EdgeUpsert(**REPEATED_EDGE), EdgeKey(**REPEATED_EDGE)
    named = r"duplicate edge upsert identities: \['\(a\)-\[:KNOWS#2\]->\(b\)'\]"
    with pytest.raises(ValidationError, match=named):
        Mutation(edge_upserts=(upsert, upsert))
    with pytest.raises(ValidationError, match="duplicate edge delete"):
        Mutation(edge_deletes=(key, key))
    with pytest.raises(ValidationError, match="duplicate kept edge key"):
        state_with(kept_edge_keys=(key, key))


def test_forward_path_and_retry_loop_are_legal() -> None:
    path = [Stage.PREPARED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED]
    for current, target in itertools.pairwise(path):
        check_transition(current, target)
    check_transition(Stage.PREPARED, Stage.FAILED)
    check_transition(Stage.FAILED, Stage.PREPARED)
    check_transition(Stage.PREPARED, Stage.CONFLICT)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (Stage.PREPARED, Stage.COMPLETED),
        (Stage.PREPARED, Stage.STATE_COMMITTED),
        (Stage.COMPLETED, Stage.PREPARED),
        (Stage.CONFLICT, Stage.PREPARED),
        (Stage.FAILED, Stage.GRAPH_APPLIED),
        (Stage.STATE_COMMITTED, Stage.GRAPH_APPLIED),
    ],
)
def test_illegal_transition_raises_naming_both_stages(current: Stage, target: Stage) -> None:
    with pytest.raises(IllegalTransition) as raised:
        check_transition(current, target)
    assert current.value in str(raised.value)
    assert target.value in str(raised.value)


def test_terminal_stages_have_no_way_out() -> None:
    assert {s for s in Stage if s.is_terminal} == {Stage.COMPLETED, Stage.CONFLICT}
    assert all(target in Stage for targets in LEGAL_TRANSITIONS.values() for target in targets)


def test_operation_id_depends_on_expected_revision() -> None:
    # A -> B -> A: the revert has the content of the first version but another revision.
    first = derive_operation_id("s", "d", 0, "sha256:a", "v1:x")
    revert = derive_operation_id("s", "d", 2, "sha256:a", "v1:x")
    assert first != revert
    assert first == derive_operation_id("s", "d", 0, "sha256:a", "v1:x")


def test_plan_rejects_inconsistent_next_state() -> None:
    plan = plan_for("d1")
    with pytest.raises(ValidationError, match="expected_revision"):
        plan.model_validate({**plan.model_dump(), "expected_revision": 3})


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("  Alice   Chen\t", "alice chen"),
        ("\uff21\uff23\uff2d\uff25\u3000\uff23orp", "acme corp"),  # full-width, ideographic space
        ("Straße", "strasse"),  # casefold, not lower
        ("ﬁnance", "finance"),  # compatibility ligature
        ("支付系统", "支付系统"),
        ("Cafe\u0301", "café"),  # combining accent composed
    ],
)
def test_normalize_name_is_nfkc_trimmed_collapsed_casefolded(name: str, key: str) -> None:
    assert normalize_name(name) == key
    assert normalize_name(key) == key  # a fixed point


def test_a_plan_names_its_base_exactly_when_it_expects_a_revision() -> None:
    plan = sample_plan("kb", "doc-1", "Alice knows Bob.", [ALICE, BOB], [])
    assert plan.base_operation_id is None
    later = sample_plan("kb", "doc-1", "Alice.", [ALICE], [], previous=plan.next_state)
    assert later.base_operation_id == plan.operation_id == later.next_state.base_operation_id
    with pytest.raises(ValidationError, match="base_operation_id"):
        later.model_validate({**later.model_dump(), "base_operation_id": None})
    with pytest.raises(ValidationError, match="base_operation_id"):
        plan.model_validate({**plan.model_dump(), "base_operation_id": "op-x"})


def test_the_same_content_on_another_base_is_another_operation() -> None:
    args = ("kb", "doc-1", 1, "sha256:c", "v1:x")
    assert derive_operation_id(*args, "op-a") != derive_operation_id(*args, "op-b")
    assert derive_operation_id(*args) != derive_operation_id(*args, "op-a")
