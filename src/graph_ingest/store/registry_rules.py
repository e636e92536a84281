"""Entity-registry merge rules, as pure functions the PostgreSQL store applies before it writes.

The registry maps ``(space, entity_type, normalized_name)`` to a node id:

* the same key for the same node merges: aliases become the sorted union, the first name stays;
* the same key for another node is a reassignment: rejected;
* a node keeps the entity type it was first registered under in its space: a registration of that
  node under another type is rejected. A node may carry several names of its one type.

A conflict rejects the whole call (RegistryConflict); nothing of it is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from graph_ingest.domain.state import EntityRegistration
from graph_ingest.store.errors import RegistryConflict

RegistryKey = tuple[str, str, str]
NodeKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class RegistryRow:
    """A registry row as stored."""

    space: str
    entity_type: str
    normalized_name: str
    name: str
    node_id: str
    aliases: tuple[str, ...]

    @property
    def key(self) -> RegistryKey:
        return (self.space, self.entity_type, self.normalized_name)


def registry_key(registration: EntityRegistration) -> RegistryKey:
    return (registration.space, registration.entity_type, registration.normalized_name)


def merge_aliases(*groups: Iterable[str]) -> tuple[str, ...]:
    """Sorted (code point order, as ``COLLATE "C"`` in SQL), distinct union."""
    return tuple(sorted({alias for group in groups for alias in group}))


def merge_within_call(registrations: Sequence[EntityRegistration]) -> list[EntityRegistration]:
    """Fold duplicates inside one call: one registration per key, in first-seen order.

    Raises RegistryConflict for one key naming two nodes, or one node under two types.
    """
    by_key: dict[RegistryKey, EntityRegistration] = {}
    type_of_node: dict[NodeKey, EntityRegistration] = {}
    for reg in registrations:
        key = (reg.space, reg.entity_type, reg.normalized_name)
        seen = by_key.get(key)
        if seen is None:
            by_key[key] = reg
        elif seen.node_id != reg.node_id:
            raise RegistryConflict(
                _reassignment(key, seen.node_id, reg.node_id, "in the same call")
            )
        else:
            by_key[key] = seen.model_copy(
                update={"aliases": merge_aliases(seen.aliases, reg.aliases)}
            )
        node = (reg.space, reg.node_id)
        first = type_of_node.setdefault(node, reg)
        if first.entity_type != reg.entity_type:
            raise RegistryConflict(_type_change(node, first.entity_type, reg, "in the same call"))
    return [_with_merged_aliases(r) for r in by_key.values()]


def _with_merged_aliases(registration: EntityRegistration) -> EntityRegistration:
    if len(registration.aliases) < 2:  # the common case: sorted and distinct already
        return registration
    aliases = merge_aliases(registration.aliases)
    if aliases == registration.aliases:  # the common case: nothing to copy
        return registration
    return registration.model_copy(update={"aliases": aliases})


def check_against_existing(
    registrations: Sequence[EntityRegistration], existing: Iterable[RegistryRow]
) -> None:
    """Raise RegistryConflict if any (merged) registration contradicts a stored row."""
    rows = list(existing)
    by_key = {row.key: row for row in rows}
    type_of_node: dict[NodeKey, RegistryRow] = {}
    for row in rows:
        type_of_node.setdefault((row.space, row.node_id), row)
    for reg in registrations:
        key = registry_key(reg)
        stored = by_key.get(key)
        if stored is not None and stored.node_id != reg.node_id:
            raise RegistryConflict(
                _reassignment(key, stored.node_id, reg.node_id, "already stored")
            )
        node = (reg.space, reg.node_id)
        typed = type_of_node.get(node)
        if typed is not None and typed.entity_type != reg.entity_type:
            raise RegistryConflict(
                _type_change(node, typed.entity_type, reg, f"stored as {typed.name!r}")
            )


def reassignment(key: RegistryKey, bound: str, offered: str, where: str) -> RegistryConflict:
    return RegistryConflict(_reassignment(key, bound, offered, where))


def _reassignment(key: RegistryKey, bound: str, offered: str, where: str) -> str:
    space, entity_type, name = key
    return (
        f"registry conflict in space {space!r}: {entity_type} {name!r} is bound to node "
        f"{bound!r} ({where}); refusing to reassign it to node {offered!r}"
    )


def _type_change(node: NodeKey, bound_type: str, reg: EntityRegistration, where: str) -> str:
    space, node_id = node
    return (
        f"registry conflict in space {space!r}: node {node_id!r} is a {bound_type} ({where}); "
        f"refusing to register it as {reg.entity_type} {reg.normalized_name!r} (type may not change)"
    )


__all__ = [
    "RegistryRow",
    "check_against_existing",
    "merge_aliases",
    "merge_within_call",
    "reassignment",
    "registry_key",
]
