"""``BacklogReader`` on PostgreSQL: one statement reads the DLQ index, the outbox and the parked
operations, on a connection of its own (a scrape never takes a connection the worker's pool
needs) that gives up within the timeout: connection refused at once, a silent host after
``connect_timeout`` (libpq's floor: 2 s), a slow statement after ``statement_timeout``."""

from __future__ import annotations

import math
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.backlog import StoreBacklog
from graph_ingest.store.postgres.translate import translating

BACKLOG = """
SELECT
    (SELECT coalesce(json_agg(json_build_array(status, code, entries)), '[]'::json)
       FROM (SELECT status, code, count(*) AS entries FROM dlq_entries GROUP BY status, code) d
    ) AS dlq_entries,
    (SELECT EXTRACT(EPOCH FROM min(dead_lettered_at))::float8
       FROM dlq_entries WHERE status = %(pending)s) AS oldest_pending_dlq_at,
    (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS outbox_rows,
    (SELECT GREATEST(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
       FROM outbox WHERE published_at IS NULL) AS outbox_oldest_age_s,
    (SELECT count(*) FROM operations WHERE stage = %(parked)s) AS parked_operations
"""
BACKLOG_PARAMS = {"pending": DlqStatus.PENDING_REVIEW.value, "parked": Stage.PARKED.value}


def backlog_from_row(row: DictRow) -> StoreBacklog:
    return StoreBacklog(
        dlq_entries={(status, code): int(n) for status, code, n in row["dlq_entries"]},
        oldest_pending_dlq_at=row["oldest_pending_dlq_at"],
        outbox_rows=int(row["outbox_rows"]),
        outbox_oldest_age_s=row["outbox_oldest_age_s"] or 0.0,
        parked_operations=int(row["parked_operations"]),
    )


class PostgresBacklog:
    """Constructing it touches nothing; the first ``backlog()`` connects. A failed read drops
    the connection, the next one connects again. Not for concurrent use (the gauges read under
    a lock). Call ``close`` when the process stops."""

    def __init__(self, settings: PostgresSettings, *, timeout_s: float) -> None:
        self._settings = settings
        self._timeout_s = timeout_s
        self._conn: psycopg.Connection[DictRow] | None = None

    def backlog(self) -> StoreBacklog:
        try:
            with translating():
                conn = self._connection()
                row = conn.execute(BACKLOG, BACKLOG_PARAMS).fetchone()
        except BaseException:
            self.close()
            raise
        assert row is not None  # a SELECT without FROM returns one row
        return backlog_from_row(row)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connection(self) -> psycopg.Connection[DictRow]:
        if self._conn is None or self._conn.closed:
            options: dict[str, Any] = {"connect_timeout": max(2, math.ceil(self._timeout_s))}
            conn = psycopg.connect(
                self._settings.conninfo(), autocommit=True, row_factory=dict_row, **options
            )
            conn.execute(f"SET statement_timeout = {math.ceil(self._timeout_s * 1000)}")
            self._conn = conn
        return self._conn


__all__ = ["BACKLOG", "PostgresBacklog", "backlog_from_row"]
