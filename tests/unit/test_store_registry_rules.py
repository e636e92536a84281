"""Registry merge rules, without a database."""

from __future__ import annotations

import pytest

from graph_ingest.domain.state import EntityRegistration
from graph_ingest.store.errors import RegistryConflict
from graph_ingest.store.registry_rules import (
    RegistryRow,
    check_against_existing,
    merge_aliases,
    merge_within_call,
)


def reg(name: str, node: str, *aliases: str, entity_type: str = "Person") -> EntityRegistration:
    return EntityRegistration(
        space="kb",
        entity_type=entity_type,
        name=name,
        normalized_name=name.casefold(),
        node_id=node,
        aliases=aliases,
    )


def row(name: str, node: str, *aliases: str, entity_type: str = "Person") -> RegistryRow:
    return RegistryRow("kb", entity_type, name.casefold(), name, node, aliases)


def test_aliases_merge_sorted_and_distinct_in_code_point_order() -> None:
    assert merge_aliases(["b", "Z"], ["a", "b"], []) == ("Z", "a", "b")


def test_identical_keys_in_one_call_merge_and_keep_the_first_name() -> None:
    merged = merge_within_call(
        [reg("Zhang San", "n1", "ZS"), reg("Li Si", "n2"), reg("ZHANG SAN", "n1", "B", "ZS")]
    )
    assert [(r.name, r.node_id, r.aliases) for r in merged] == [
        ("Zhang San", "n1", ("B", "ZS")),
        ("Li Si", "n2", ()),
    ]


def test_one_key_for_two_nodes_in_one_call_conflicts() -> None:
    with pytest.raises(RegistryConflict, match=r"'zhang san' is bound to node 'n1'.*'n2'"):
        merge_within_call([reg("Zhang San", "n1"), reg("zhang san", "n2")])


def test_one_node_under_two_types_in_one_call_conflicts() -> None:
    with pytest.raises(RegistryConflict, match="type may not change"):
        merge_within_call([reg("Acme", "n1", entity_type="Company"), reg("Acme Guy", "n1")])


def test_one_node_may_carry_several_names_of_its_type() -> None:
    merged = merge_within_call([reg("Zhang San", "n1"), reg("Zhang Wei", "n1")])
    check_against_existing(merged, [row("Old Name", "n1")])
    assert len(merged) == 2


def test_existing_name_bound_to_another_node_conflicts_naming_both() -> None:
    with pytest.raises(RegistryConflict) as raised:
        check_against_existing([reg("Zhang San", "n3")], [row("Zhang San", "n1")])
    message = str(raised.value)
    assert all(part in message for part in ("'kb'", "Person", "'zhang san'", "'n1'", "'n3'"))
    assert raised.value.code.value == "FAILED_PRECONDITION"


def test_existing_node_under_another_type_conflicts() -> None:
    with pytest.raises(RegistryConflict, match="node 'n1' is a Company"):
        check_against_existing([reg("Acme", "n1")], [row("Acme", "n1", entity_type="Company")])


def test_same_key_same_node_passes() -> None:
    check_against_existing([reg("Zhang San", "n1", "new")], [row("Zhang San", "n1", "old")])
