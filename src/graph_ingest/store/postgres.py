"""PostgreSQL implementation of ``OperationStore`` (psycopg 3 + a connection pool).

Constructing the store touches nothing; ``start()`` opens the pool (and fails with
StoreUnavailable if PostgreSQL cannot be reached in ``connect_timeout_s``). Run
``graph_ingest.store.migrate.migrate`` first: the store expects the schema to exist.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store import postgres_rows as rows
from graph_ingest.store import postgres_sql as sql
from graph_ingest.store.base import (
    CommittedElements,
    DlqEntry,
    DlqQuery,
    DlqStats,
    OperationEventEncoder,
    PlanClaim,
    RecoveryClaim,
    Replan,
    StoreError,
    Submission,
    UnitOfWork,
)
from graph_ingest.store.errors import translated, translating
from graph_ingest.store.postgres_uow import PostgresUnitOfWork

log = logging.getLogger(__name__)


class PostgresOperationStore:
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

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Open the connection pool and wait for its first connections (idempotent)."""
        if self._pool is None:
            self._pool = self._open_pool()

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        s = self._settings
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
        log.info("postgres store: pool open on %s:%s schema=%s", s.host, s.port, s.schema_name)
        return pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    # -- writes ------------------------------------------------------------------------------

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
            self._pool = self._open_pool()  # raises, keeping the old pool, if it cannot
            pool.close(timeout=0)

    # -- reads -------------------------------------------------------------------------------

    @translated
    def get_operation(self, operation_id: str) -> Operation | None:
        row = self._fetch_one(sql.GET_OPERATION, (operation_id,))
        return None if row is None else rows.operation_from_row(row)

    @translated
    def get_plan_bytes(self, operation_id: str) -> bytes | None:
        row = self._fetch_one(sql.GET_PLAN_BYTES, (operation_id,))
        return None if row is None else bytes(row["plan_bytes"])

    @translated
    def get_work_headers(self, operation_id: str) -> dict[str, str]:
        row = self._fetch_one(sql.GET_WORK_HEADERS, (operation_id,))
        return {} if row is None else dict(row["work_headers"])

    @translated
    def get_document_state(self, space: str, document_id: str) -> DocumentState | None:
        row = self._fetch_one(sql.GET_DOCUMENT_STATE, (space, document_id))
        return None if row is None else rows.state_from_row(row)

    @translated
    def document_history(self, space: str, document_id: str) -> list[DocumentState]:
        found = self._fetch_all(sql.DOCUMENT_HISTORY, (space, document_id))
        return [DocumentState.model_validate(row["state"]) for row in found]

    @translated
    def iter_committed_elements(
        self, *, space: str | None = None, document_id: str | None = None, page_size: int = 500
    ) -> Iterator[list[CommittedElements]]:
        if page_size < 1:
            raise StoreError(
                f"page_size must be at least 1, not {page_size}", code=StatusCode.INVALID_ARGUMENT
            )
        after = ("", "")
        while True:
            page = self._committed_elements_page(space, document_id, after, page_size)
            if page:
                yield page
            if len(page) < page_size:
                return
            after = page[-1].key

    @translated
    def _committed_elements_page(
        self, space: str | None, document_id: str | None, after: tuple[str, str], limit: int
    ) -> list[CommittedElements]:
        found = self._fetch_all(
            sql.COMMITTED_ELEMENTS_PAGE,
            {
                "space": space,
                "document_id": document_id,
                "after_space": after[0],
                "after_document_id": after[1],
                "limit": limit,
            },
        )
        return [rows.committed_elements_from_row(row) for row in found]

    @translated
    def plan_bytes_of(self, operation_ids: Sequence[str]) -> dict[str, bytes]:
        if not operation_ids:
            return {}
        found = self._fetch_all(sql.PLAN_BYTES_OF, {"operation_id": sorted(set(operation_ids))})
        return {row["operation_id"]: bytes(row["plan_bytes"]) for row in found}

    @translated
    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]:
        if not candidates:
            return set()
        found = self._fetch_all(sql.CLAIMED_EDGES, rows.claimed_edge_columns(candidates))
        return {candidates[row["ord"] - 1] for row in found}

    @translated
    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]:
        if not candidates:
            return set()
        found = self._fetch_all(sql.CLAIMED_NODES, rows.claimed_node_columns(candidates))
        return {candidates[row["ord"] - 1] for row in found}

    @translated
    def unlisted_nodes(self, node_ids: Sequence[str]) -> set[str]:
        if not node_ids:
            return set()
        found = self._fetch_all(sql.UNLISTED_NODES, {"node_id": sorted(set(node_ids))})
        return {row["node_id"] for row in found}

    @translated
    def registry_lookup(
        self, space: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        unique = sorted(set(keys))
        if not unique:
            return {}
        found = self._fetch_all(
            sql.SELECT_REGISTRY_NODES,
            {
                "space": [space] * len(unique),
                **rows.key_columns(("entity_type", "normalized_name"), unique),
            },
        )
        return {(row["entity_type"], row["normalized_name"]): row["node_id"] for row in found}

    @translated
    def database_time(self) -> datetime:
        row = self._fetch_one(sql.DATABASE_TIME, ())
        assert row is not None  # SELECT without FROM returns one row
        now: datetime = row["now"]
        return now

    # -- the DLQ index -------------------------------------------------------------------------

    @translated
    def list_dlq_entries(self, query: DlqQuery) -> list[DlqEntry]:
        found = self._fetch_all(sql.LIST_DLQ_ENTRIES, rows.dlq_query_params(query))
        return [rows.dlq_entry_from_row(row) for row in found]

    @translated
    def count_dlq_entries(self, query: DlqQuery) -> int:
        row = self._fetch_one(sql.COUNT_DLQ_ENTRIES, rows.dlq_query_params(query))
        return 0 if row is None else int(row["entries"])

    @translated
    def get_dlq_entry(self, dlq_id: str) -> DlqEntry | None:
        row = self._fetch_one(sql.GET_DLQ_ENTRY, (dlq_id,))
        return None if row is None else rows.dlq_entry_from_row(row)

    @translated
    def dlq_stats(self) -> DlqStats:
        found = self._fetch_all(sql.DLQ_STATS, ())
        return DlqStats(counts=tuple(rows.dlq_count_from_row(row) for row in found))

    # -- recovery leases (RecoveryStore) ----------------------------------------------------
    # Each call is its own transaction: the pooled connection commits when the block ends.

    @translated
    def claim_for_recovery(
        self,
        *,
        stages: Collection[Stage],
        older_than_s: float,
        limit: int,
        claimer: str,
        lease_s: float,
    ) -> list[RecoveryClaim]:
        found = self._fetch_all(
            sql.CLAIM_FOR_RECOVERY,
            {
                "stages": sorted(stage.value for stage in stages),
                "parked": Stage.PARKED.value,
                "older_than_s": float(older_than_s),
                "limit": limit,
                "claimer": claimer,
                "lease_s": float(lease_s),
            },
        )
        claims = [rows.recovery_claim_from_row(row) for row in found]
        return sorted(
            claims, key=lambda c: (c.operation.updated_at, c.operation.operation_id)
        )  # RETURNING keeps no order

    @translated
    def claim_operation(
        self, operation_id: str, *, stages: Collection[Stage], claimer: str, lease_s: float
    ) -> RecoveryClaim | None:
        row = self._fetch_one(
            sql.CLAIM_OPERATION,
            {
                "operation_id": operation_id,
                "stages": sorted(stage.value for stage in stages),
                "claimer": claimer,
                "lease_s": float(lease_s),
            },
        )
        return None if row is None else rows.recovery_claim_from_row(row)

    @translated
    def stranded_parked(self, *, older_than_s: float, limit: int) -> list[Operation]:
        found = self._fetch_all(
            sql.STRANDED_PARKED,
            {
                "parked": Stage.PARKED.value,
                "older_than_s": float(older_than_s),
                "limit": limit,
                **rows.on_its_way_params(),
            },
        )
        return [rows.operation_from_row(row) for row in found]

    @translated
    def release_recovery_claim(self, operation_id: str, claimer: str) -> bool:
        return bool(self._fetch_all(sql.RELEASE_RECOVERY_CLAIM, (operation_id, claimer)))

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        with self.unit_of_work() as uow:
            uow.put_plan_claims(claims)

    # -- the planner's records -----------------------------------------------------------------

    @translated
    def get_submission(self, submission_id: str) -> Submission | None:
        row = self._fetch_one(sql.GET_SUBMISSION, (submission_id,))
        return None if row is None else rows.submission_from_row(row)

    @translated
    def submission_of_operation(self, operation_id: str) -> Submission | None:
        row = self._fetch_one(sql.SUBMISSION_OF_OPERATION, (operation_id,))
        return None if row is None else rows.submission_from_row(row)

    @translated
    def newest_submission(self, space: str, document_id: str) -> Submission | None:
        row = self._fetch_one(sql.NEWEST_SUBMISSION, (space, document_id))
        return None if row is None else rows.submission_from_row(row)

    @translated
    def get_replan(self, operation_id: str) -> Replan | None:
        row = self._fetch_one(sql.GET_REPLAN, (operation_id,))
        return None if row is None else rows.replan_from_row(row)

    @translated
    def replan_making(self, operation_id: str) -> Replan | None:
        row = self._fetch_one(sql.REPLAN_MAKING, (operation_id,))
        return None if row is None else rows.replan_from_row(row)

    @translated
    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        unique = sorted(set(keys))
        if not unique:
            return {}
        found = self._fetch_all(
            sql.PLAN_CLAIMS,
            rows.key_columns(("operation_id", "fingerprint"), unique),
        )
        return {
            (row["operation_id"], row["fingerprint"]): bytes(row["plan_bytes"]) for row in found
        }

    def _require_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        if self._pool is None:
            raise StoreError(
                "PostgresOperationStore is not started (call start() first)",
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


__all__ = ["PostgresOperationStore"]
