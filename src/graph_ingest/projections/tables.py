"""The read tables on PostgreSQL: where a projection has folded up to, and a batch of operation
events folded into ``operation_status`` with those positions, in ONE transaction.

The tables live in ``<store schema>_read`` (migration 0008), which the write side never writes.
A batch locks the operations it touches (a transaction-scoped advisory lock per operation id, in
a stable order), reads their statuses, folds its events (``projections.fold``: pure) and writes
the changed statuses and the positions with one statement per list. The locks matter when two
projectors briefly fold the same partition (the old owner finishing its batch while the new one
starts): the second waits, then folds onto what the first wrote.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from graph_ingest.domain.operation import Operation
from graph_ingest.kafka.records import Partition, Position
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.fold import FoldVerdict, OperationStatus, fold_all
from graph_ingest.projections.rows import (
    JSONB_COLUMNS,
    STATUS_COLUMNS,
    status_columns,
    status_from_row,
)
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.postgres.session import OwnedPool
from graph_ingest.store.postgres.translate import translating

OPERATION_STATUS = "operation_status"
"""The projection of the operations topic (its name in ``tracking_positions``)."""

SKIPPED = "SKIPPED"
"""The outcome of an event that carries no snapshot (``projections.events``)."""


class Positioned(Protocol):
    """A consumed message as a fold sees its place: topic, partition, offset, Kafka time."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> datetime | None: ...


REBUILD_LOCK_CLASS = 1380076612
"""The class of the session advisory lock ``projections rebuild`` holds on the schema it builds
(the key: ``hashtext`` of that schema's name): one rebuild at a time, and no projector there."""

_BEING_REBUILT = (
    "SELECT NOT pg_try_advisory_xact_lock_shared(%(class)s, hashtext(%(schema)s)) AS held"
)

_LOCK = "SELECT pg_advisory_xact_lock(hashtext({name}), hashtext(id)) FROM unnest({ids}) AS id"
_SELECT = "SELECT {columns} FROM {schema}.operation_status WHERE operation_id = ANY({ids})"
_UPSERT = """
INSERT INTO {schema}.operation_status ({columns})
SELECT {casts} FROM unnest({arrays}) AS i({columns})
ON CONFLICT (operation_id) DO UPDATE SET {updates}
"""
_SAVE_POSITIONS = """
INSERT INTO {schema}.tracking_positions (projection, topic, partition, "offset", event_at)
SELECT %(projection)s, topic, partition, "offset", event_at
FROM unnest(
    %(topic)s::text[], %(partition)s::int[], %(offset)s::bigint[], %(event_at)s::timestamptz[]
) AS p(topic, partition, "offset", event_at)
ON CONFLICT (projection, topic, partition) DO UPDATE
SET "offset" = GREATEST(tracking_positions."offset", excluded."offset"),
    event_at = CASE WHEN excluded."offset" > tracking_positions."offset"
                    THEN excluded.event_at ELSE tracking_positions.event_at END,
    updated_at = CASE WHEN excluded."offset" > tracking_positions."offset"
                      THEN now() ELSE tracking_positions.updated_at END
"""
_POSITIONS = """
SELECT topic, partition, "offset", event_at, updated_at FROM {schema}.tracking_positions
WHERE projection = %(projection)s AND topic = ANY(%(topic)s::text[])
"""
_ARRAY_TYPES = {
    "expected_revision": "bigint",
    "sequence": "bigint",
    "attempts": "bigint",
    "retry_tier": "int",
    "next_retry_at": "timestamptz",
    "created_at": "timestamptz",
    "updated_at": "timestamptz",
}
"""The element type of each column's array parameter (the others: text)."""


@dataclass(frozen=True, slots=True)
class FoldedUpTo:
    """A projection's position in one partition: the last offset folded, that message's Kafka
    timestamp, and when the position last moved."""

    partition: Partition
    offset: int
    event_at: datetime | None
    moved_at: datetime


def read_schema(settings: PostgresSettings) -> str:
    """The schema of the read tables: the store's, suffixed (migration 0008 names it so)."""
    return f"{settings.schema_name}_read"


def rebuild_schema(settings: PostgresSettings) -> str:
    """Where ``projections rebuild`` builds fresh read tables: beside the live schema."""
    return f"{read_schema(settings)}_rebuild"


class ReadTables(OwnedPool):
    """The read tables of one store schema (``schema``: another set of them, a rebuild's).
    Constructing it touches nothing; ``start`` opens its connection pool."""

    def __init__(self, settings: PostgresSettings, *, schema: str | None = None) -> None:
        self._settings = settings
        self.schema = schema or read_schema(settings)
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._sql = _statements(self.schema)

    def beside(self, schema: str) -> ReadTables:
        """The read tables of ``schema`` on this one's connection pool (closing this closes it)."""
        other = ReadTables(self._settings, schema=schema)
        other._pool = self._pool
        return other

    def fetch(self, query: sql.SQL | sql.Composed, params: dict[str, Any]) -> list[DictRow]:
        """The rows of one read (its own pooled connection; the read service's way in)."""
        with translating(), self._require_pool().connection() as conn:
            return conn.cursor(row_factory=dict_row).execute(query, params).fetchall()

    def being_rebuilt(self) -> bool:
        """Whether ``projections rebuild`` is building these tables now (it holds their lock)."""
        params = {"class": REBUILD_LOCK_CLASS, "schema": self.schema}
        return bool(self.fetch(sql.SQL(_BEING_REBUILT), params)[0]["held"])

    def positions(self, projection: str, partitions: Collection[Partition]) -> dict[Partition, int]:
        """The last offset ``projection`` folded of each of ``partitions`` it has folded at all."""
        rows = self.fetch(
            self._sql["positions"],
            {"projection": projection, "topic": sorted({topic for topic, _ in partitions})},
        )
        stored = {(row["topic"], row["partition"]): row["offset"] for row in rows}
        return {partition: stored[partition] for partition in partitions if partition in stored}

    def progress(self, projection: str, topic: str) -> list[FoldedUpTo]:
        """Where ``projection`` has folded ``topic`` up to, per partition it has folded at all."""
        rows = self.fetch(self._sql["positions"], {"projection": projection, "topic": [topic]})
        return [
            FoldedUpTo(
                partition=(row["topic"], row["partition"]),
                offset=row["offset"],
                event_at=row["event_at"],
                moved_at=row["updated_at"],
            )
            for row in rows
        ]

    def fold(self, events: Sequence[OperationEvent]) -> dict[Position, str]:
        """Fold ``events`` into ``operation_status`` and record their positions, in one
        transaction; the outcome of each event by position (a verdict, or ``SKIPPED``)."""
        by_operation: dict[str, list[OperationEvent]] = defaultdict(list)
        outcomes: dict[Position, str] = {}
        for event in events:
            if event.operation is None:
                outcomes[(event.topic, event.partition, event.offset)] = SKIPPED
            else:
                by_operation[event.operation.operation_id].append(event)
        ids = sorted(by_operation)  # one lock order for every projector: no deadlock
        with translating(), self._require_pool().connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(self._sql["lock"], {"ids": ids})
            stored = {
                row["operation_id"]: status_from_row(row)
                for row in cur.execute(self._sql["select"], {"ids": ids}).fetchall()
            }
            changed = _folded(stored, by_operation, outcomes)
            if changed:
                cur.execute(self._sql["upsert"], status_columns(changed))
            self.record_positions(cur, OPERATION_STATUS, events)
        return outcomes

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Cursor[DictRow]]:
        """A cursor in one transaction, committed when the block ends (the other projections'
        folds: their rows and, with ``record_positions``, their positions)."""
        with translating(), self._require_pool().connection() as conn:
            yield conn.cursor(row_factory=dict_row)

    def record_positions(
        self, cur: psycopg.Cursor[DictRow], projection: str, events: Sequence[Positioned]
    ) -> None:
        """Record, in ``cur``'s transaction, that ``projection`` has folded ``events``."""
        cur.execute(self._sql["save_positions"], _position_columns(projection, events))


def _folded(
    stored: dict[str, OperationStatus],
    by_operation: dict[str, list[OperationEvent]],
    outcomes: dict[Position, str],
) -> list[OperationStatus]:
    """Fold each operation's events onto its stored status; the statuses that changed."""
    changed = []
    for operation_id, events in by_operation.items():
        snapshots: list[Operation] = [e.operation for e in events if e.operation is not None]
        status, verdicts = fold_all(stored.get(operation_id), snapshots)
        for event, verdict in zip(events, verdicts, strict=True):
            outcomes[(event.topic, event.partition, event.offset)] = verdict.value
        if status is not None and any(v is not FoldVerdict.DUPLICATE for v in verdicts):
            changed.append(status)
    return changed


def _position_columns(projection: str, events: Sequence[Positioned]) -> dict[str, Any]:
    last: dict[Partition, Positioned] = {}
    for event in events:
        partition = (event.topic, event.partition)
        seen = last.get(partition)
        if seen is None or event.offset > seen.offset:
            last[partition] = event
    return {
        "projection": projection,
        "topic": [topic for topic, _ in last],
        "partition": [partition for _, partition in last],
        "offset": [event.offset for event in last.values()],
        "event_at": [event.timestamp for event in last.values()],
    }


def _statements(schema: str) -> dict[str, sql.Composed]:
    def sql_of(text: str, **parts: sql.Composable) -> sql.Composed:
        return sql.SQL(text).format(schema=sql.Identifier(schema), **parts)

    names = sql.SQL(", ").join(sql.Identifier(c) for c in STATUS_COLUMNS)
    casts = sql.SQL(", ").join(
        sql.SQL("{}::jsonb" if c in JSONB_COLUMNS else "{}").format(sql.Identifier(c))
        for c in STATUS_COLUMNS
    )
    arrays = sql.SQL(", ").join(
        sql.SQL("{}::{}[]").format(sql.Placeholder(c), sql.SQL(_ARRAY_TYPES.get(c, "text")))
        for c in STATUS_COLUMNS
    )
    updates = sql.SQL(", ").join(
        sql.SQL("{0} = excluded.{0}").format(sql.Identifier(c))
        for c in STATUS_COLUMNS
        if c != "operation_id"
    )
    ids = sql.SQL("%(ids)s::text[]")
    return {
        "lock": sql_of(_LOCK, ids=ids, name=sql.Literal(schema)),
        "select": sql_of(_SELECT, columns=names, ids=ids),
        "upsert": sql_of(_UPSERT, columns=names, casts=casts, arrays=arrays, updates=updates),
        "save_positions": sql_of(_SAVE_POSITIONS),
        "positions": sql_of(_POSITIONS),
    }


__all__ = [
    "OPERATION_STATUS",
    "REBUILD_LOCK_CLASS",
    "SKIPPED",
    "FoldedUpTo",
    "Position",
    "Positioned",
    "ReadTables",
    "read_schema",
]
