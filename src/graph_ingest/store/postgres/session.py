"""The two ways the PostgreSQL store talks to the database: in a transaction, or a short read;
and the connection pool both draw from.

The writers of every concern are mixins on ``TransactionSession`` (a unit of work's cursor: one
statement per list); the readers are mixins on ``PooledReads`` (a pooled connection per call).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from graph_ingest.domain.status import StatusCode
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.errors import StoreError
from graph_ingest.store.operations import OperationEventEncoder
from graph_ingest.store.postgres.translate import translating

log = logging.getLogger(__name__)


class TransactionSession:
    """A connection whose transaction the store opens and ends, and the cursor every writer
    uses. Methods that raise leave nothing of their own call written: their writes run inside a
    savepoint."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        event_encoder: OperationEventEncoder,
        operations_topic: str,
    ) -> None:
        self._conn = conn
        self._cur: psycopg.Cursor[DictRow] = conn.cursor(row_factory=dict_row)
        self._encode = event_encoder
        self._topic = operations_topic

    def _execute(
        self, query: str, params: Mapping[str, Any], *, prepare: bool | None = None
    ) -> None:
        """``prepare``: psycopg's (None: prepared from its fifth run; False: never, so
        PostgreSQL plans it afresh at every run, with the tables' current sizes)."""
        self._cur.execute(query, params, prepare=prepare)

    def _fetch(
        self, query: str, params: Mapping[str, Any], *, prepare: bool | None = None
    ) -> list[DictRow]:
        self._execute(query, params, prepare=prepare)
        return self._cur.fetchall()

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        """Undo the block's writes if it raises; the surrounding transaction goes on."""
        self._cur.execute("SAVEPOINT graph_ingest_call")
        try:
            yield
        except BaseException:
            with suppress(psycopg.Error):  # a dead connection: the whole transaction is lost
                self._cur.execute("ROLLBACK TO SAVEPOINT graph_ingest_call")
            raise
        self._cur.execute("RELEASE SAVEPOINT graph_ingest_call")


class PooledReads:
    """Reads outside a unit of work: each call its own pooled connection (autocommit off, so
    its own short transaction, committed when the connection goes back to the pool)."""

    _pool: ConnectionPool[psycopg.Connection[Any]] | None

    def _require_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        if self._pool is None:
            raise StoreError(
                f"{type(self).__name__} is not started (call start() first)",
                code=StatusCode.FAILED_PRECONDITION,
            )
        return self._pool

    def _fetch_all(self, query: str, params: tuple[Any, ...] | Mapping[str, Any]) -> list[DictRow]:
        with self._require_pool().connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def _fetch_one(self, query: str, params: tuple[Any, ...] | Mapping[str, Any]) -> DictRow | None:
        found = self._fetch_all(query, params)
        return found[0] if found else None


def open_pool(settings: PostgresSettings) -> ConnectionPool[psycopg.Connection[Any]]:
    """A pool of connections to ``settings`` (search path: its schema), open, its first
    connections made: StoreUnavailable if PostgreSQL cannot be reached in time."""
    s = settings
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        s.conninfo(),
        min_size=s.pool_min_size,
        max_size=s.pool_max_size,
        timeout=float(s.connect_timeout_s),
        # A connection that died with the server (restart, failover) is replaced on checkout
        # instead of failing the next unit of work.
        check=ConnectionPool.check_connection,
        name=f"graph-ingest-{s.schema_name}",
        open=False,
    )
    try:
        with translating():
            pool.open(wait=True, timeout=float(s.connect_timeout_s))
    except BaseException:
        pool.close()
        raise
    log.info("postgres pool open on %s:%s schema=%s", s.host, s.port, s.schema_name)
    return pool


class OwnedPool(PooledReads):
    """Reads on a connection pool of its own: constructing touches nothing, ``start`` opens
    the pool (idempotent), ``close`` closes it."""

    _settings: PostgresSettings

    def start(self) -> None:
        """Open the connection pool and wait for its first connections (idempotent)."""
        if self._pool is None:
            self._pool = open_pool(self._settings)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
