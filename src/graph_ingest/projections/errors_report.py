"""The errors report (seed 002 §7.3): every failure recorded in a time range, from the read
tables, grouped by code and error class, with counts, first and last seen, and example operation
ids. The read service behind `graph-ingest errors report` and the API's errors report.

A failure is a step of an operation's history that recorded an error (``transitions[].error``,
``projections.rows``): each failed attempt, each dead-lettering, each conflict, counted once
however often its event was delivered; what the write side records as failures (its failure
records and its conflicts). A parking reason is none: the plan only waits for an earlier version,
and is released when that one commits. The range is half-open, ``[from, to)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from graph_ingest.projections.queries import InvalidQuery
from graph_ingest.projections.tables import ReadTables

MAX_EXAMPLES = 5
"""Example operation ids per group."""

# An operation's steps are no newer than its last update, so "updated_at >= from" (indexed)
# keeps only the operations that may have a step in the range before their steps are unnested.
_REPORT = """
SELECT step.error->>'code' AS code,
       step.error->>'error_class' AS error_class,
       count(*) AS failures,
       count(DISTINCT s.operation_id) AS operations,
       min(step.at) AS first_seen,
       max(step.at) AS last_seen,
       (array_agg(DISTINCT s.operation_id ORDER BY s.operation_id))[1:{examples}] AS examples
FROM {table} AS s,
     jsonb_to_recordset(s.transitions) AS step(at timestamptz, stage text, error jsonb)
WHERE s.updated_at >= %(from)s AND s.created_at < %(to)s
  AND jsonb_typeof(step.error) = 'object' AND step.stage <> 'PARKED'
  AND step.at >= %(from)s AND step.at < %(to)s
GROUP BY 1, 2
ORDER BY failures DESC, code, error_class
"""


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """The failures of one code and error class in the range."""

    code: str
    error_class: str
    failures: int
    operations: int
    first_seen: datetime
    last_seen: datetime
    example_operation_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ErrorsReport:
    start: datetime
    end: datetime
    groups: tuple[ErrorGroup, ...]
    """Most failures first."""

    @property
    def failures(self) -> int:
        return sum(group.failures for group in self.groups)


def check_range(start: datetime, end: datetime) -> None:
    """Raise InvalidQuery unless ``[start, end)`` is a range of aware times, start first."""
    if start.utcoffset() is None or end.utcoffset() is None:
        raise InvalidQuery("the range's times need a timezone, e.g. 2026-12-01T09:30:00Z")
    if start >= end:
        raise InvalidQuery(
            f"the range is empty: from {start.isoformat()} is not before to {end.isoformat()}"
        )


def report_json(found: ErrorsReport) -> dict[str, Any]:
    """The report as JSON: `errors report --json` prints it and the API answers it."""
    groups = [
        {
            **asdict(group),
            "first_seen": group.first_seen.isoformat(),
            "last_seen": group.last_seen.isoformat(),
            "example_operation_ids": list(group.example_operation_ids),
        }
        for group in found.groups
    ]
    return {
        "from": found.start.isoformat(),
        "to": found.end.isoformat(),
        "failures": found.failures,
        "groups": groups,
    }


class ErrorsReports:
    """Errors reports from the read tables of one store schema (``ReadTables``, started)."""

    def __init__(self, tables: ReadTables) -> None:
        self._tables = tables
        self._query = sql.SQL(_REPORT).format(
            table=sql.SQL("{}.operation_status").format(sql.Identifier(tables.schema)),
            examples=sql.Literal(MAX_EXAMPLES),
        )

    def report(self, start: datetime, end: datetime) -> ErrorsReport:
        check_range(start, end)
        rows = self._tables.fetch(self._query, {"from": start, "to": end})
        return ErrorsReport(
            start=start,
            end=end,
            groups=tuple(
                ErrorGroup(
                    code=row["code"],
                    error_class=row["error_class"],
                    failures=row["failures"],
                    operations=row["operations"],
                    first_seen=row["first_seen"],
                    last_seen=row["last_seen"],
                    example_operation_ids=tuple(row["examples"]),
                )
                for row in rows
            ),
        )


__all__ = [
    "MAX_EXAMPLES",
    "ErrorGroup",
    "ErrorsReport",
    "ErrorsReports",
    "check_range",
    "report_json",
]
