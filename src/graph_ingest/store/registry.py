"""The entity registry port: which node a (space, type, normalized name) is bound to.

The rules a registration must keep (one node per name, one type per node) are pure and live in
``registry_rules.py``; this port is the table and its locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_ingest.domain.state import EntityRegistration


class RegistryWriter(Protocol):
    """The registry side of a unit of work."""

    def lock_nodes(self, keys: Sequence[tuple[str, str]]) -> None:
        """Take the (space, node_id) locks ``register_entities`` takes, for nodes a write
        deletes too: whoever writes or deletes a node holds its lock until its graph write is
        recorded (GRAPH_APPLIED), so a delete and another document's upsert never interleave."""

    def register_entities(self, registrations: Sequence[EntityRegistration]) -> None:
        """Upsert registry rows. Same (space, type, normalized name) with the same node: aliases
        union. Another node for that name, or a known node under another type: RegistryConflict,
        and nothing of the call is written."""


class RegistryReader(Protocol):
    """The registry read outside a unit of work (the planner resolving names)."""

    def registry_lookup(
        self, space: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The node each registered (entity_type, normalized_name) of ``space`` is bound to; keys
        that are not registered are left out. One read for the whole list."""
        ...


__all__ = ["RegistryReader", "RegistryWriter"]
