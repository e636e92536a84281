"""PostgreSQL implementation of ``OperationStore`` (psycopg 3 + a connection pool).

Constructing the store touches nothing; ``start()`` opens the pool (and fails with
StoreUnavailable if PostgreSQL cannot be reached in ``connect_timeout_s``). Run
``graph_ingest.store.migrate.migrate`` first: the store expects the schema to exist. Its reads
are the read ports' mixins; ``unit_of_work()`` hands out a ``PostgresUnitOfWork``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.operations import OperationEventEncoder
from graph_ingest.store.postgres.audit import PostgresAuditLog
from graph_ingest.store.postgres.dlq_index import PostgresDlqIndexReader
from graph_ingest.store.postgres.documents import PostgresDocumentReader
from graph_ingest.store.postgres.operations import PostgresOperationReader
from graph_ingest.store.postgres.plan_claims import PostgresPlanClaimReader
from graph_ingest.store.postgres.recovery import PostgresRecoveryLeases
from graph_ingest.store.postgres.redrive_tasks import (
    PostgresRedriveTasks,
    PostgresRepeatFailures,
)
from graph_ingest.store.postgres.registry import PostgresRegistryReader
from graph_ingest.store.postgres.session import OwnedPool, open_pool
from graph_ingest.store.postgres.submissions import PostgresPlannerRecordReader
from graph_ingest.store.postgres.translate import translated, translating
from graph_ingest.store.postgres.unit_of_work import PostgresUnitOfWork

log = logging.getLogger(__name__)

DATABASE_TIME = "SELECT clock_timestamp() AS now"


class PostgresOperationStore(
    PostgresOperationReader,
    PostgresDocumentReader,
    PostgresRegistryReader,
    PostgresDlqIndexReader,
    PostgresPlannerRecordReader,
    PostgresPlanClaimReader,
    PostgresRecoveryLeases,
    PostgresRedriveTasks,
    PostgresRepeatFailures,
    PostgresAuditLog,
    OwnedPool,
):
    """Implements ``OperationStore``, ``RecoveryStore``, ``RedriveTaskStore``,
    ``RepeatFailures`` and ``AuditLog``."""

    def __init__(
        self,
        settings: PostgresSettings,
        *,
        event_encoder: OperationEventEncoder,
        operations_topic: str,
    ) -> None:
        self._settings = settings
        self._encode = event_encoder
        self._topic = operations_topic
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """One transaction on one pooled connection: commit on normal exit, roll back on error."""
        pool = self._require_pool()
        with translating(), pool.connection() as conn:
            yield PostgresUnitOfWork(conn, event_encoder=self._encode, operations_topic=self._topic)

    def probe(self) -> None:
        """A fresh connection answers ``SELECT 1``; if the pool lost connections meanwhile, it is
        replaced, so work resumes at once: the pool's own reconnection backs off exponentially
        (1 s, 2 s, 4 s, ...), which after a long outage could keep a healthy server unused for
        tens of seconds."""
        pool = self._require_pool()
        with translating(), psycopg.connect(self._settings.conninfo(), autocommit=True) as conn:
            conn.execute("SELECT 1")
        if pool.pop_stats().get("connections_errors", 0):
            log.info("postgres store: the server answers again; replacing the connection pool")
            self._pool = open_pool(self._settings)  # raises, keeping the old pool, if it cannot
            pool.close(timeout=0)

    @translated
    def database_time(self) -> datetime:
        row = self._fetch_one(DATABASE_TIME, ())
        assert row is not None  # SELECT without FROM returns one row
        now: datetime = row["now"]
        return now

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        with self.unit_of_work() as uow:
            uow.put_plan_claims(claims)


__all__ = ["PostgresOperationStore"]
