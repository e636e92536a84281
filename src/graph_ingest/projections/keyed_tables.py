"""Read tables of one row per key that hold the newest message of the key (DLQ entries by DLQ
id, worker degradation by worker id), folded order-free.

A key's messages share a partition (the producer partitions by key), so the Kafka offset orders
them. A batch keeps the message of each key at the highest offset, and the upsert replaces a
stored row only with one from a higher offset: folding any permutation of a set of messages,
duplicates included, leaves the row of the newest. Rows are written in key order, so two
projectors briefly folding the same partition wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from graph_ingest.kafka.records import Position
from graph_ingest.projections.tables import SKIPPED, Positioned, ReadTables
from graph_ingest.store.postgres.params import columns

ADVANCE = "ADVANCE"
"""The outcome of a message whose row is now the table's (the newest of its key yet)."""
SUPERSEDED = "SUPERSEDED"
"""The outcome of a message older than (or as old as) the row of its key: nothing changes."""

_UPSERT = """
INSERT INTO {table} ({columns})
SELECT {casts} FROM unnest({arrays}) AS i({columns}) ORDER BY {key}
ON CONFLICT ({key}) DO UPDATE SET {updates}
WHERE excluded."offset" > {table}."offset"
RETURNING {key}
"""


@dataclass(frozen=True, slots=True)
class KeyedTable:
    """A table of the read schema named like its projection; ``types`` maps each column, in
    statement order, to its SQL type (``offset`` among them)."""

    name: str
    key: str
    types: Mapping[str, str]

    def upsert(self, schema: str) -> sql.Composed:
        names = list(self.types)
        return sql.SQL(_UPSERT).format(
            table=sql.Identifier(schema, self.name),
            columns=sql.SQL(", ").join(sql.Identifier(c) for c in names),
            casts=sql.SQL(", ").join(
                sql.SQL("{}::{}").format(sql.Identifier(c), sql.SQL(t))
                for c, t in self.types.items()
            ),
            arrays=sql.SQL(", ").join(
                sql.SQL("{}::{}[]").format(sql.Placeholder(c), sql.SQL(_element(t)))
                for c, t in self.types.items()
            ),
            key=sql.Identifier(self.key),
            updates=sql.SQL(", ").join(
                sql.SQL("{0} = excluded.{0}").format(sql.Identifier(c))
                for c in names
                if c != self.key
            ),
        )

    def select(self, schema: str, condition: str = "TRUE") -> sql.Composed:
        """``SELECT`` every column ``WHERE condition`` (fixed text, values as parameters)."""
        return sql.SQL("SELECT {} FROM {} WHERE {}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in self.types),
            sql.Identifier(schema, self.name),
            sql.SQL(condition),
        )


def _element(sql_type: str) -> str:
    """The element type of a column's array parameter (JSON travels as text)."""
    return "text" if sql_type == "jsonb" else sql_type


def fold_newest(
    tables: ReadTables,
    table: KeyedTable,
    events: Sequence[Positioned],
    rows: Sequence[tuple[Positioned, Mapping[str, Any]]],
) -> dict[Position, str]:
    """Upsert the newest of ``rows`` (each an event of ``events`` and its column values) per key
    and record the positions of ``events`` under ``table.name``, in one transaction; the outcome
    of each event by position (ADVANCE, SUPERSEDED, or SKIPPED for one without a row)."""
    newest: dict[Any, tuple[Positioned, Mapping[str, Any]]] = {}
    for event, values in rows:
        seen = newest.get(values[table.key])
        if seen is None or event.offset > seen[0].offset:
            newest[values[table.key]] = (event, values)
    with tables.transaction() as cur:
        applied: set[Any] = set()
        if newest:
            params = columns([values for _, values in newest.values()], list(table.types))
            cur.execute(table.upsert(tables.schema), params)
            applied = {row[table.key] for row in cur.fetchall()}
        tables.record_positions(cur, table.name, events)
    outcomes = {_position(event): SKIPPED for event in events}
    for event, values in rows:
        key = values[table.key]
        won = newest[key][0] is event and key in applied
        outcomes[_position(event)] = ADVANCE if won else SUPERSEDED
    return outcomes


def _position(event: Positioned) -> Position:
    return (event.topic, event.partition, event.offset)


__all__ = ["ADVANCE", "SUPERSEDED", "KeyedTable", "fold_newest"]
