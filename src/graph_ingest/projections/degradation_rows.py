"""Worker degradation as the read side holds it (``<schema>_read.worker_degradation``): one row
per worker, its newest degradation event (``domain.degradation``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graph_ingest.domain.degradation import DegradationLevel
from graph_ingest.projections.keyed_tables import KeyedTable
from graph_ingest.projections.read_events import DegradationChange
from graph_ingest.projections.tables import ReadTables
from graph_ingest.store.postgres.params import Row, json_text

WORKER_DEGRADATION = "worker_degradation"
"""The projection of the degradation topic (its table, and its name in ``tracking_positions``)."""

DEGRADATION_TABLE = KeyedTable(
    WORKER_DEGRADATION,
    key="worker_id",
    types={
        "worker_id": "text",
        "level": "text",
        "previous_level": "text",
        "reason": "text",
        "breakers": "jsonb",
        "since": "timestamptz",
        "last_event_at": "timestamptz",
        "topic": "text",
        "partition": "int",
        "offset": "bigint",
    },
)

# The reason names the breakers that are not closed, as ``resilience.degradation`` words it:
# "circuit breaker open: neo4j, postgres; half-open: kafka" (inside "worker unhealthy (...)"
# for L3). The event carries no other list of them.
_BREAKERS = re.compile(r"\b(half-open|open): ([^;)]*)")


@dataclass(frozen=True, slots=True)
class WorkerDegradation:
    worker_id: str
    level: DegradationLevel
    previous_level: DegradationLevel
    reason: str
    breakers: dict[str, str]
    """Each breaker that is not closed -> ``open`` or ``half-open`` (none at L0)."""
    since: datetime
    """When the worker entered the level (the event's own time)."""
    last_event_at: datetime | None
    """When the event was published (its Kafka timestamp)."""
    topic: str
    partition: int
    offset: int


def breakers_of(reason: str) -> dict[str, str]:
    """The breakers a degradation reason names as not closed, with their state."""
    return {
        name.strip(): state
        for state, names in _BREAKERS.findall(reason)
        for name in names.split(",")
        if name.strip()
    }


def worker_degradation(change: DegradationChange) -> WorkerDegradation | None:
    """The read row of ``change``; None for a change without an event (skipped)."""
    event = change.event
    if event is None:
        return None
    return WorkerDegradation(
        worker_id=event.worker_id,
        level=event.level,
        previous_level=event.previous_level,
        reason=event.reason,
        breakers=breakers_of(event.reason),
        since=event.at,
        last_event_at=change.timestamp,
        topic=change.topic,
        partition=change.partition,
        offset=change.offset,
    )


def degradation_values(row: WorkerDegradation) -> dict[str, Any]:
    return {
        "worker_id": row.worker_id,
        "level": row.level.value,
        "previous_level": row.previous_level.value,
        "reason": row.reason,
        "breakers": json_text(row.breakers),
        "since": row.since,
        "last_event_at": row.last_event_at,
        "topic": row.topic,
        "partition": row.partition,
        "offset": row.offset,
    }


def degradation_from_row(row: Row) -> WorkerDegradation:
    return WorkerDegradation(
        **{
            **row,
            "level": DegradationLevel(row["level"]),
            "previous_level": DegradationLevel(row["previous_level"]),
        }
    )


def worker_degradations(tables: ReadTables) -> list[WorkerDegradation]:
    """Every worker's newest degradation, by worker id (the read service of the table)."""
    query = DEGRADATION_TABLE.select(tables.schema, "TRUE ORDER BY worker_id")
    return [degradation_from_row(row) for row in tables.fetch(query, {})]


__all__ = [
    "DEGRADATION_TABLE",
    "WORKER_DEGRADATION",
    "WorkerDegradation",
    "breakers_of",
    "degradation_from_row",
    "degradation_values",
    "worker_degradation",
    "worker_degradations",
]
