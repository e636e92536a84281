"""Entity resolution against a registry (a dict here: the PostgreSQL one has its own tests)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from graph_ingest.domain.candidates import CandidateEvidence, EntityCandidate
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.resolution import RegistryKey, new_node_id, resolve_entities

pytestmark = pytest.mark.timeout(30)


class Registry:
    """Bound names of one space; counts the reads."""

    def __init__(self, bound: dict[tuple[str, str, str], str] | None = None) -> None:
        self.bound = bound or {}
        self.reads: list[list[RegistryKey]] = []

    def registry_lookup(self, space: str, keys: Sequence[RegistryKey]) -> dict[RegistryKey, str]:
        self.reads.append(list(keys))
        return {k: self.bound[(space, *k)] for k in keys if (space, *k) in self.bound}


def candidate(
    name: str, *aliases: str, entity_type: str = "Person", at: int = 0
) -> EntityCandidate:
    return EntityCandidate(
        entity_type=entity_type,
        name=name,
        aliases=aliases,
        evidence=(CandidateEvidence(chunk_id="c", quote=name, start=at, end=at + len(name)),),
    )


def test_an_unknown_entity_gets_a_deterministic_id_from_space_type_and_name() -> None:
    registry = Registry()

    first = resolve_entities("kb", [candidate("Alice  Chen", "Alice")], registry)
    again = resolve_entities("kb", [candidate("alice chen")], registry)
    other_space = resolve_entities("other", [candidate("Alice Chen")], registry)
    other_type = resolve_entities("kb", [candidate("Alice Chen", entity_type="Team")], registry)

    (alice,) = first.entities
    assert alice.node_id == new_node_id("kb", "Person", "alice chen")
    assert again.entities[0].node_id == alice.node_id
    assert other_space.entities[0].node_id != alice.node_id
    assert other_type.entities[0].node_id != alice.node_id
    assert (alice.name, alice.keys, alice.aliases) == (
        "Alice  Chen",
        ("alice chen", "alice"),
        ("Alice",),
    )


def test_a_registered_name_or_alias_binds_the_entity_to_its_node_in_one_read() -> None:
    registry = Registry({("kb", "Person", "alice"): "n-alice", ("kb", "Team", "core"): "n-core"})

    resolution = resolve_entities(
        "kb",
        [candidate("Alice Chen", "Alice"), candidate("Core", entity_type="Team"), candidate("Bob")],
        registry,
    )

    assert [e.node_id for e in resolution.entities] == [
        "n-alice",
        "n-core",
        new_node_id("kb", "Person", "bob"),
    ]
    assert len(registry.reads) == 1
    assert sorted(registry.reads[0]) == [
        ("Person", "alice"),
        ("Person", "alice chen"),
        ("Person", "bob"),
        ("Team", "core"),
    ]
    assert resolution.node_of("Person", "ALICE") == "n-alice"
    assert resolution.node_of("Person", " alice  chen ") == "n-alice"
    with pytest.raises(KeyError):
        resolution.node_of("Team", "Alice")


def test_candidates_sharing_a_name_or_a_node_are_one_entity() -> None:
    registry = Registry(
        {("kb", "Person", "a. chen"): "n-alice", ("kb", "Person", "ali"): "n-alice"}
    )
    first = candidate("Alice", at=0)
    by_alias = EntityCandidate(
        entity_type="Person",
        name="Alice Chen",
        aliases=("alice",),
        properties={"role": "engineer"},
        evidence=(CandidateEvidence(chunk_id="c", quote="Alice Chen", start=20, end=30),),
    )
    # these two share no name, but the registry binds both to one node
    a_chen, ali = candidate("A. Chen", at=40), candidate("Ali", at=50)

    resolution = resolve_entities("kb", [first, by_alias, a_chen, ali], registry)

    assert len(resolution.entities) == 2
    alice, registered = resolution.entities
    assert alice.name == "Alice"
    assert alice.aliases == ("Alice Chen",)
    assert alice.properties == {"role": "engineer"}
    assert [e.start for e in alice.evidence] == [0, 20]
    assert (registered.node_id, registered.name, registered.aliases) == (
        "n-alice",
        "A. Chen",
        ("Ali",),
    )


def test_pronouns_never_bind_nor_become_aliases() -> None:
    registry = Registry({("kb", "Person", "he"): "n-someone", ("kb", "Person", "他"): "n-other"})

    resolution = resolve_entities(
        "kb", [candidate("Bob", "he", "It"), candidate("张三", "他")], registry
    )

    bob, zhang = resolution.entities
    assert bob.node_id == new_node_id("kb", "Person", "bob")
    assert zhang.node_id == new_node_id("kb", "Person", "张三")
    assert (bob.aliases, zhang.aliases) == ((), ())
    assert ("Person", "he") not in registry.reads[0]
    with pytest.raises(KeyError):
        resolution.node_of("Person", "he")


def test_names_bound_to_two_nodes_are_ambiguous_and_fail_naming_them() -> None:
    registry = Registry(
        {("kb", "Person", "alice chen"): "n-chen", ("kb", "Person", "alice wong"): "n-wong"}
    )

    with pytest.raises(PlanningError) as raised:
        resolve_entities(
            "kb", [candidate("Alice", "Alice Chen", "Alice Wong"), candidate("Bob")], registry
        )

    assert raised.value.code is StatusCode.FAILED_PRECONDITION
    message = str(raised.value)
    assert "ambiguous" in message
    assert "node 'n-chen' (as ['alice chen'])" in message
    assert "node 'n-wong' (as ['alice wong'])" in message


def test_registrations_bind_the_name_with_its_aliases_and_each_alias_alone() -> None:
    resolution = resolve_entities("kb", [candidate("Alice Chen", "Alice", "she")], Registry())
    node = new_node_id("kb", "Person", "alice chen")

    registrations = resolution.registrations("kb")

    assert [(r.name, r.normalized_name, r.node_id, r.aliases) for r in registrations] == [
        ("Alice Chen", "alice chen", node, ("Alice",)),
        ("Alice", "alice", node, ()),
    ]
    assert {r.space for r in registrations} == {"kb"}
