"""The transactional-outbox relay: publish PostgreSQL ``outbox`` rows to Kafka, in id order.

Algorithm (at-least-once, never skips, never reorders within a key):

1. One active relay per schema: a session-level ``pg_try_advisory_lock`` held on the relay's own
   connection. Another relay stands by and takes over when that connection ends.
2. Read the oldest unpublished rows (``ORDER BY id LIMIT batch_size``) and produce them in that
   order; the idempotent producer keeps order within a partition, and key = ``message_key`` puts
   every event of an operation on one partition.
3. Flush and require every delivery to succeed, *then* set ``published_at`` for exactly those ids.
   A crash between 2 and 3 publishes the rows again; consumers de-duplicate by the per-operation
   ``sequence`` (header and event). A row whose delivery failed is never marked, so the next round
   starts from it again (when a batch fails, only its leading rows that Kafka confirmed are marked).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from graph_ingest.errors import GraphIngestError
from graph_ingest.kafka.errors import KafkaIngestError
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.resilience.backoff import backoff_delay
from graph_ingest.settings import Settings
from graph_ingest.store.base import OutboxMessage
from graph_ingest.store.errors import translating

logger = logging.getLogger(__name__)

HEADER_OPERATION_ID = "operation_id"
HEADER_SEQUENCE = "sequence"


def advisory_lock_key(schema_name: str) -> int:
    """The bigint advisory-lock key of the relay of one schema (stable across processes)."""
    digest = hashlib.blake2b(f"graph-ingest:outbox-relay:{schema_name}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def outbox_message(
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: Mapping[str, Any] | None,
    operation_id: str | None,
    sequence: int | None,
) -> OutboxMessage:
    """An outbox row as a Kafka message. JSONB header values become strings; ``operation_id`` and
    ``sequence`` are added as headers from their columns unless the row's headers carry them."""
    out = {str(k): v if isinstance(v, str) else str(v) for k, v in (headers or {}).items()}
    if operation_id is not None:
        out.setdefault(HEADER_OPERATION_ID, operation_id)
    if sequence is not None:
        out.setdefault(HEADER_SEQUENCE, str(sequence))
    return OutboxMessage(
        topic=topic,
        key=bytes(key) if key is not None else None,
        value=bytes(value),
        headers=out,
        operation_id=operation_id,
        sequence=sequence,
    )


class OutboxRelay:
    """Drains ``<schema>.outbox`` to Kafka. Network clients are created in :meth:`start`."""

    def __init__(
        self,
        settings: Settings,
        *,
        producer_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self._settings = settings
        self._schema = settings.postgres.schema_name
        self._lock_key = advisory_lock_key(self._schema)
        self._batch_size = settings.relay.batch_size
        self._idle_s = settings.relay.idle_poll_interval_s
        self._backoff = (settings.relay.retry_initial_backoff_s, settings.relay.retry_max_backoff_s)
        self._standby_poll_s = settings.relay.standby_poll_s
        self._producer = KafkaProducer(
            settings.kafka,
            flush_timeout_s=settings.relay.flush_timeout_s,
            **dict(producer_overrides or {}),
        )
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._holds_lock = False
        self._standby_logged = False
        self._table = sql.Identifier(self._schema, "outbox")
        self.published_total = 0
        """Rows published (and marked) by this relay since it was created."""

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the Kafka producer and connect to PostgreSQL (the lock is taken on first use)."""
        self._producer.start()
        self._connection()

    def close(self) -> None:
        """Flush the producer and close the connection (which releases the relay lock)."""
        self._producer.close()
        self._disconnect()

    def __enter__(self) -> OutboxRelay:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def is_active(self) -> bool:
        """True while this relay holds the schema's relay lock."""
        return self._holds_lock

    # --- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Publish until ``stop`` is set; returns after finishing the batch in hand.

        Sleeps only when there is nothing to publish (or while standing by). Errors are logged and
        retried with backoff: a row is never skipped, so a row that can never be published (e.g.
        larger than the broker accepts) holds the relay back and shows up as a growing backlog.
        """
        logger.info(
            "outbox[%s] relay running: batch %d, idle poll %.2fs",
            self._schema,
            self._batch_size,
            self._idle_s,
        )
        attempt = 0
        while not stop.is_set():
            try:
                count = self.run_once()
            except GraphIngestError as exc:
                attempt += 1
                delay = backoff_delay(attempt, *self._backoff)
                logger.log(
                    logging.WARNING if exc.code.is_transient else logging.ERROR,
                    "outbox[%s] publishing failed (attempt %d, %s %s): %s; retrying in %.1fs",
                    self._schema,
                    attempt,
                    exc.code,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                stop.wait(delay)
                continue
            if attempt:
                logger.info("outbox[%s] publishing again after %d failures", self._schema, attempt)
                attempt = 0
            if count == 0:
                stop.wait(self._idle_s if self._holds_lock else self._standby_poll_s)
        logger.info("outbox[%s] relay stopped", self._schema)

    def run_once(self) -> int:
        """Publish up to ``relay.batch_size`` of the oldest unpublished rows; return how many.

        Returns 0 when there is nothing to publish or another relay holds the lock. Raises (our
        errors) when PostgreSQL or Kafka fails; then no row of the batch has been marked.
        """
        self._producer.start()  # idempotent: run_once works without an explicit start()
        if not self._acquire_lock():
            return 0
        started = time.monotonic()
        rows = self._fetch()
        if not rows:
            return 0
        ids = [row[0] for row in rows]
        messages = [outbox_message(*row[1:]) for row in rows]
        try:
            self._producer.produce_batch(messages)
        except KafkaIngestError as exc:
            self._mark_confirmed_prefix(ids[: exc.delivered])
            raise
        marked = self._mark(ids)
        if marked != len(ids):
            logger.warning(
                "outbox[%s] rows %d..%d: %d of %d were already marked published (another relay?)",
                self._schema,
                ids[0],
                ids[-1],
                len(ids) - marked,
                len(ids),
            )
        self.published_total += len(ids)
        logger.debug(
            "outbox[%s] rows %d..%d: published %d in %.0f ms",
            self._schema,
            ids[0],
            ids[-1],
            len(ids),
            (time.monotonic() - started) * 1000,
        )
        return len(ids)

    def _mark_confirmed_prefix(self, ids: list[int]) -> None:
        """After a failed batch, mark the leading rows Kafka confirmed, so that a row that cannot
        be published does not make the rows before it go out again on every retry."""
        if not ids:
            return
        try:
            self._mark(ids)
        except GraphIngestError as exc:
            logger.warning("outbox[%s] could not mark delivered rows: %s", self._schema, exc)
            return
        self.published_total += len(ids)
        logger.info(
            "outbox[%s] rows %d..%d published before the batch failed",
            self._schema,
            ids[0],
            ids[-1],
        )

    def backlog(self) -> int:
        """Number of unpublished outbox rows (works before :meth:`start`, with its own connection)."""
        query = sql.SQL("SELECT count(*) FROM {} WHERE published_at IS NULL").format(self._table)
        if self._conn is not None and not self._conn.closed:
            return self._scalar(self._conn, query)
        with translating(), self._connect() as conn:
            return self._scalar(conn, query)

    # --- PostgreSQL -----------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self._settings.postgres.conninfo(), autocommit=True)

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None or self._conn.closed:
            self._holds_lock = False
            with translating():
                self._conn = self._connect()
        return self._conn

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if self._holds_lock:
            logger.info("outbox[%s] relay lock released", self._schema)
        self._holds_lock = False
        if conn is not None:
            conn.close()

    def _scalar(self, conn: psycopg.Connection[tuple[Any, ...]], query: sql.Composed) -> int:
        with translating():
            row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0

    def _execute(
        self, query: sql.SQL | sql.Composed, params: tuple[Any, ...]
    ) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run one statement on the relay connection; on any database error drop the connection
        (and with it the lock): a fresh one is made, and the lock re-taken, on the next round."""
        conn = self._connection()
        try:
            with translating():
                return conn.execute(query, params)
        except GraphIngestError:
            self._disconnect()
            raise

    def _acquire_lock(self) -> bool:
        if self._holds_lock and self._conn is not None and not self._conn.closed:
            return True
        row = self._execute(
            sql.SQL("SELECT pg_try_advisory_lock(%s)"), (self._lock_key,)
        ).fetchone()
        self._holds_lock = bool(row and row[0])
        if self._holds_lock:
            logger.info(
                "outbox[%s] relay lock %d acquired: this relay is active",
                self._schema,
                self._lock_key,
            )
            self._standby_logged = False
        elif not self._standby_logged:
            logger.info(
                "outbox[%s] another relay holds lock %d: standing by (polling every %.1fs)",
                self._schema,
                self._lock_key,
                self._standby_poll_s,
            )
            self._standby_logged = True
        return self._holds_lock

    def _fetch(self) -> list[tuple[Any, ...]]:
        query = sql.SQL(
            "SELECT id, topic, message_key, message_value, headers, operation_id, sequence "
            "FROM {} WHERE published_at IS NULL ORDER BY id LIMIT %s"
        ).format(self._table)
        return self._execute(query, (self._batch_size,)).fetchall()

    def _mark(self, ids: list[int]) -> int:
        query = sql.SQL(
            "UPDATE {} SET published_at = now() WHERE id = ANY(%s) AND published_at IS NULL"
        ).format(self._table)
        return self._execute(query, (ids,)).rowcount


__all__ = ["OutboxRelay", "advisory_lock_key", "outbox_message"]
