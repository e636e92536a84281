"""The entity registry port on PostgreSQL: node locks, the registry rows, their upsert."""

from __future__ import annotations

from collections.abc import Sequence

from graph_ingest.domain.state import EntityRegistration
from graph_ingest.store.postgres.fragments import advisory_xact_locks, lock_keys
from graph_ingest.store.postgres.params import Columns, Row, json_text, key_columns
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated
from graph_ingest.store.registry_rules import (
    RegistryRow,
    check_against_existing,
    merge_within_call,
    reassignment,
    registry_key,
)

# Serialises "one type per node" registry checks for the same node.
LOCK_REGISTRY_NODES = advisory_xact_locks("entity_registry")


# The stored rows of the call's keys and of its nodes, locked (a row may come twice): one index
# probe per key and per node, whatever the statistics say (a subquery that locks is never
# merged into a join, so each runs once per key). An earlier form, "space = ANY(..) AND
# entity_type = ANY(..) AND normalized_name = ANY(..) OR ..", let the planner scan every row of
# the space and test it against the arrays, analyzed or not: a batch of 100 names took 72 ms in
# a registry of 300,000 rows, 1.4 ms this way (issue 20). Never prepared: planned with the
# batch's own key count.
_REGISTRY_COLUMNS = "space, entity_type, normalized_name, name, node_id, aliases"
SELECT_REGISTRY = f"""
SELECT r.* FROM unnest(%(space)b::text[], %(entity_type)b::text[], %(normalized_name)b::text[])
  AS k(space, entity_type, normalized_name)
CROSS JOIN LATERAL (
    SELECT {_REGISTRY_COLUMNS} FROM entity_registry AS e
    WHERE e.space = k.space AND e.entity_type = k.entity_type
      AND e.normalized_name = k.normalized_name
    FOR UPDATE
) AS r
UNION ALL
SELECT r.* FROM unnest(%(node_space)b::text[], %(node_id)b::text[]) AS k(space, node_id)
CROSS JOIN LATERAL (
    SELECT {_REGISTRY_COLUMNS} FROM entity_registry AS e
    WHERE e.space = k.space AND e.node_id = k.node_id
    FOR UPDATE
) AS r
"""


# A name registered concurrently to another node is not touched (WHERE) and not counted: the
# statement returns how many rows it wrote, one row whatever the batch size.
UPSERT_REGISTRY = """
WITH written AS (
INSERT INTO entity_registry AS r (
    space, entity_type, normalized_name, name, node_id, aliases, created_at, updated_at
)
SELECT space, entity_type, normalized_name, name, node_id,
       ARRAY(SELECT json_array_elements_text(aliases)), now(), now()
FROM json_to_recordset(%(rows)s::json) AS i(
    space text, entity_type text, normalized_name text, name text, node_id text, aliases json
)
ON CONFLICT (space, entity_type, normalized_name) DO UPDATE
SET aliases = ARRAY(
        SELECT DISTINCT (alias COLLATE "C") FROM unnest(r.aliases || EXCLUDED.aliases) AS alias
        ORDER BY 1
    ),
    updated_at = now()
WHERE r.node_id = EXCLUDED.node_id
RETURNING 1
)
SELECT count(*) AS written FROM written
"""


SELECT_REGISTRY_NODES = """
SELECT r.space, r.entity_type, r.normalized_name, r.node_id
FROM entity_registry AS r
JOIN unnest(%(space)b::text[], %(entity_type)b::text[], %(normalized_name)b::text[])
  AS k(space, entity_type, normalized_name)
  ON r.space = k.space AND r.entity_type = k.entity_type
 AND r.normalized_name = k.normalized_name
"""


class PostgresRegistryWriter(TransactionSession):
    """``RegistryWriter`` in a unit of work."""

    @translated
    def lock_nodes(self, keys: Sequence[tuple[str, str]]) -> None:
        if keys:
            nodes = sorted(set(keys))
            self._execute(LOCK_REGISTRY_NODES, lock_keys(nodes))

    @translated
    def register_entities(self, registrations: Sequence[EntityRegistration]) -> None:
        if not registrations:
            return
        merged = merge_within_call(registrations)
        nodes = registry_nodes(merged)
        self._execute(LOCK_REGISTRY_NODES, lock_keys(nodes))
        existing = [
            registry_row(row)
            for row in self._fetch(SELECT_REGISTRY, lookup_parameters(merged, nodes), prepare=False)
        ]
        check_against_existing(merged, existing)
        stored = {row.key: row for row in existing}
        to_write = [
            r
            for r in merged
            if (row := stored.get(registry_key(r))) is None
            or not set(r.aliases) <= set(row.aliases)
        ]
        if not to_write:
            return
        with self._savepoint():
            (found,) = self._fetch(UPSERT_REGISTRY, {"rows": registration_rows(to_write)})
            if found["written"] < len(to_write):
                # Another transaction registered one of these new names first, to another node:
                # every name this call wrote is bound to its node now, a lost one is not.
                bound = {
                    (row["space"], row["entity_type"], row["normalized_name"]): row["node_id"]
                    for row in self._fetch(SELECT_REGISTRY_NODES, registration_columns(to_write))
                }
                lost = next(r for r in to_write if bound.get(registry_key(r)) != r.node_id)
                key = registry_key(lost)
                raise reassignment(
                    key, bound.get(key, "<unknown>"), lost.node_id, "registered concurrently"
                )


class PostgresRegistryReader(PooledReads):
    """``RegistryReader``: one short read per call."""

    @translated
    def registry_lookup(
        self, space: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        unique = sorted(set(keys))
        if not unique:
            return {}
        found = self._fetch_all(
            SELECT_REGISTRY_NODES,
            {
                "space": [space] * len(unique),
                **key_columns(("entity_type", "normalized_name"), unique),
            },
        )
        return {(row["entity_type"], row["normalized_name"]): row["node_id"] for row in found}


def registry_nodes(registrations: Sequence[EntityRegistration]) -> list[tuple[str, str]]:
    """The registrations' nodes, (space, node_id), sorted: the order they are locked in."""
    return sorted({(r.space, r.node_id) for r in registrations})


def lookup_parameters(
    registrations: Sequence[EntityRegistration], nodes: Sequence[tuple[str, str]]
) -> Columns:
    """SELECT_REGISTRY's parameters: the registrations' keys, sorted (the order their rows are
    locked in), and their ``registry_nodes``."""
    return {
        **key_columns(
            ("space", "entity_type", "normalized_name"),
            sorted({registry_key(r) for r in registrations}),
        ),
        **key_columns(("node_space", "node_id"), nodes),
    }


def registration_columns(registrations: Sequence[EntityRegistration]) -> Columns:
    return {
        "space": [r.space for r in registrations],
        "entity_type": [r.entity_type for r in registrations],
        "normalized_name": [r.normalized_name for r in registrations],
        "name": [r.name for r in registrations],
        "node_id": [r.node_id for r in registrations],
        "aliases": [json_text(list(r.aliases)) for r in registrations],
    }


def registration_rows(registrations: Sequence[EntityRegistration]) -> str:
    """The registrations as one JSON array of rows (``json_to_recordset``): serialised in C,
    where one array per column costs the driver about half a microsecond per value."""
    return json_text(
        [
            {
                "space": r.space,
                "entity_type": r.entity_type,
                "normalized_name": r.normalized_name,
                "name": r.name,
                "node_id": r.node_id,
                "aliases": r.aliases,
            }
            for r in registrations
        ]
    )


def registry_row(row: Row) -> RegistryRow:
    return RegistryRow(
        space=row["space"],
        entity_type=row["entity_type"],
        normalized_name=row["normalized_name"],
        name=row["name"],
        node_id=row["node_id"],
        aliases=tuple(row["aliases"]),
    )
