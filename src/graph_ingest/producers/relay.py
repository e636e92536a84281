"""The transactional-outbox relay: publish PostgreSQL ``outbox`` rows to Kafka, in id order.

Algorithm (at-least-once, never skips, never reorders within a key):

1. One active relay per schema: a session-level ``pg_try_advisory_lock`` held on the relay's own
   connection. Another relay stands by and takes over when that connection ends.
2. On taking the lock, a relay creates a fresh *transactional* producer (``transactional.id`` =
   ``relay.transactional_id(schema)``, the same for every relay of the schema) and initialises
   transactions with it. That fences the producer of the previous holder: a relay whose PostgreSQL
   session died mid-batch does not know it has lost the lock, and its deliveries may still be in
   flight. Unfenced, they could land after its successor's newer snapshots of the same operations
   on the compacted operations topic (key = operation_id), and compaction would keep the older
   one. Fenced, its open transaction is aborted and its later writes are rejected, so
   ``read_committed`` consumers see all it committed before anything its successor writes.
3. Read the oldest unpublished rows (``ORDER BY id LIMIT batch_size``) and produce them in that
   order in one Kafka transaction; key = ``message_key`` puts every event of an operation on one
   partition, where order is kept.
4. Only once the transaction is committed, set ``published_at`` for exactly those ids. A crash
   between 3 and 4 publishes the rows again; consumers de-duplicate by the per-operation
   ``sequence`` (header and event). A row whose delivery failed is never marked, so the next round
   starts from it again. A failed transaction is aborted whole; when one row fails for good, the
   rows before it are published in a transaction of their own, so that only the rows after it
   wait. A relay that finds itself fenced releases the lock and stands by.
5. With nothing to publish, the active relay waits on ``LISTEN`` for the notification a commit of
   new rows sends, up to ``relay.idle_poll_interval_s``. Only rows that end an operation's
   journey or carry no stage notify (migration 0014): a batch's events leave together as soon as
   its state is committed, in one relay pass, and an idle relay barely queries.
6. The active relay deletes the rows published longer ago than ``relay.published_retention_s``
   (``outbox_purge``): the outbox holds the unpublished rows and the retention's published ones,
   what ``dlq reindex`` and anyone following a journey can still read there.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.hooks import Hooks, relay_loop
from graph_ingest.kafka.errors import KafkaIngestError, ProducerFenced
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.producers.outbox_purge import PurgeSchedule
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.messages import OutboxMessage, outbox_message
from graph_ingest.settings import Settings
from graph_ingest.store.outbox import OutboxFeed, OutboxRetention, OutboxRow, OutboxSignal
from graph_ingest.store.postgres.outbox import PostgresOutboxFeed
from graph_ingest.waiting import Bell

logger = logging.getLogger(__name__)

T = TypeVar("T")


def advisory_lock_key(schema_name: str) -> int:
    """The bigint advisory-lock key of the relay of one schema (stable across processes)."""
    digest = hashlib.blake2b(f"graph-ingest:outbox-relay:{schema_name}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class OutboxRelay:
    """Drains ``<schema>.outbox`` to Kafka. Network clients are created in :meth:`start`."""

    def __init__(
        self,
        settings: Settings,
        *,
        producer_overrides: Mapping[str, Any] | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        """``hooks``: whoever watches the relay (``hooks``: a ``polled`` per round, a
        ``published`` per batch published, a ``purged`` per purge of published rows); none by
        default."""
        self._hooks = hooks or Hooks(relay_loop(settings.postgres.schema_name))
        self._operations_topic = settings.topics.operations
        self._schema = settings.postgres.schema_name
        self._lock_key = advisory_lock_key(self._schema)
        self._batch_size = settings.relay.batch_size
        self._idle_s = settings.relay.idle_poll_interval_s
        self._backoff = (settings.relay.retry_initial_backoff_s, settings.relay.retry_max_backoff_s)
        self._standby_poll_s = settings.relay.standby_poll_s
        self._purge = PurgeSchedule(settings.relay, self._schema)
        self._producer = TransactionalProducer(
            settings.kafka,
            settings.relay.transactional_id(self._schema),
            timeout_s=settings.relay.flush_timeout_s,
            **dict(producer_overrides or {}),
        )
        feed = PostgresOutboxFeed(settings.postgres)
        self._outbox: OutboxFeed = feed
        self._signal: OutboxSignal = feed
        self._retention: OutboxRetention = feed
        self._holds_lock = False
        self._standby_logged = False
        self._stopping = Bell()  # rung when ``run``'s stop is set: ends the idle wait at once
        self.published_total = 0
        """Rows published (and marked) by this relay since it was created."""

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect to PostgreSQL. The lock is taken on first use, and the Kafka producer created
        then: creating it fences the active relay's producer, which a standby must not do."""
        self._connection()

    def close(self) -> None:
        """Drop the producer and close the connection (which releases the relay lock)."""
        self._producer.close()
        self._disconnect()
        self._stopping.close()

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
        backoff = Backoff(*self._backoff)
        self._stopping.hush()
        # a waiting thread costs nothing; polling ``stop`` from the idle wait cost 2 % of a core
        threading.Thread(
            target=self._ring_when_set, args=(stop,), name="outbox-relay-stop", daemon=True
        ).start()
        while not stop.is_set():
            self._hooks.polled()
            try:
                count = self.run_once()
            except GraphIngestError as exc:
                delay = backoff.failed()
                logger.log(
                    logging.WARNING if exc.code.is_transient else logging.ERROR,
                    "outbox[%s] publishing failed (attempt %d, %s %s): %s; retrying in %.1fs",
                    self._schema,
                    backoff.failures,
                    exc.code,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                stop.wait(delay)
                continue
            if failures := backoff.succeeded():
                logger.info("outbox[%s] publishing again after %d failures", self._schema, failures)
            if self._holds_lock and self._purge.due():
                self._purge.run(self.purge_published, self._hooks.purged)
            if count == 0:
                self._idle(stop)
        logger.info("outbox[%s] relay stopped", self._schema)

    def _ring_when_set(self, stop: threading.Event) -> None:
        stop.wait()
        self._stopping.ring()

    def _idle(self, stop: threading.Event) -> None:
        """Nothing to publish: the active relay waits to be told of committed rows (at most the
        idle poll interval), a standby polls for the lock."""
        if not (self._holds_lock and self._outbox.is_open):
            stop.wait(self._standby_poll_s)
            return
        try:
            self._signal.wait_for_rows(self._idle_s, wake=self._stopping.fileno)
        except GraphIngestError as exc:  # the next round opens a fresh session
            logger.warning("outbox[%s] waiting for rows failed: %s", self._schema, exc)
            self._disconnect()

    def run_once(self) -> int:
        """Publish up to ``relay.batch_size`` of the oldest unpublished rows; return how many.

        Returns 0 when there is nothing to publish or another relay holds the lock, or has just
        fenced this one. Raises (our errors) when PostgreSQL or Kafka fails; then no row of the
        batch has been marked (unless a row failed for good: see the module docstring).
        """
        if not self._acquire_lock():
            return 0
        rows = self._fetch()
        if not rows:
            return 0
        ids = [row.id for row in rows]
        messages = [
            outbox_message(
                r.topic, r.message_key, r.message_value, r.headers, r.operation_id, r.sequence
            )
            for r in rows
        ]
        try:
            self._publish(rows, messages)
        except ProducerFenced as exc:
            self._stand_down(ids, exc)
            return 0
        except KafkaIngestError as exc:
            if exc.fatal:
                self._disconnect()  # a fresh producer comes with the lock, when taken again
            elif exc.delivered and not exc.code.is_transient:
                self._publish_rows_before_failure(rows[: exc.delivered], messages[: exc.delivered])
            raise
        return len(ids)

    def purge_published(self) -> int:
        """Delete up to ``outbox_purge.PURGE_ROWS`` rows published longer ago than the retention;
        returns how many. Raises (our errors) when PostgreSQL fails; the session is dropped then."""
        retention_s, limit = self._purge.retention_s, self._purge.limit
        return self._on_feed(lambda _: self._retention.purge_published(retention_s, limit))

    def _report(self, rows: Sequence[OutboxRow], messages: Sequence[OutboxMessage]) -> None:
        """Fire ``published``: the operation events by stage, each row's time to Kafka's ack."""
        now = time.time()
        stages = Counter(
            m.headers[kafka_headers.STAGE].lower()
            for m in messages
            if m.topic == self._operations_topic and kafka_headers.STAGE in m.headers
        )
        self._hooks.published(
            stages, [now - r.created_at.timestamp() for r in rows if r.created_at is not None]
        )

    def _publish(self, rows: Sequence[OutboxRow], messages: list[OutboxMessage]) -> None:
        """Publish the rows in one Kafka transaction, then mark them published."""
        ids = [row.id for row in rows]
        started = time.monotonic()
        self._producer.produce_transaction(messages)
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
        if self._hooks.subscribers:
            self._report(rows, messages)
        logger.debug(
            "outbox[%s] rows %d..%d: published %d in %.0f ms",
            self._schema,
            ids[0],
            ids[-1],
            len(ids),
            (time.monotonic() - started) * 1000,
        )

    def _publish_rows_before_failure(
        self, rows: Sequence[OutboxRow], messages: list[OutboxMessage]
    ) -> None:
        """A row failed for good and took its batch's transaction down with it, so the rows
        before it were aborted too, although the broker had accepted them. Publish those in a
        transaction of their own, so that the failing row holds back only the rows after it and
        the rows before it go out once, not again on every retry."""
        ids = [row.id for row in rows]
        try:
            self._publish(rows, messages)
        except GraphIngestError as exc:
            if isinstance(exc, KafkaIngestError) and exc.fatal:
                self._disconnect()
            logger.warning(
                "outbox[%s] rows %d..%d before the failing row not published: %s",
                self._schema,
                ids[0],
                ids[-1],
                exc,
            )
            return
        logger.info(
            "outbox[%s] rows %d..%d published before the row that failed",
            self._schema,
            ids[0],
            ids[-1],
        )

    def _stand_down(self, ids: list[int], exc: ProducerFenced) -> None:
        """Another relay has taken the lock (this one's PostgreSQL session must have ended) and
        fenced this relay's producer: leave the rows to it and stand by."""
        logger.warning(
            "outbox[%s] fenced as %s by a newer relay: rows %d..%d not published by this one "
            "(%s); releasing the lock and standing by",
            self._schema,
            self._producer.transactional_id,
            ids[0],
            ids[-1],
            exc,
        )
        self._disconnect()

    def backlog(self) -> int:
        """Number of unpublished outbox rows (works before :meth:`start`, with its own connection)."""
        return self._outbox.unpublished_count()

    # --- PostgreSQL -----------------------------------------------------------------------------

    def _connection(self) -> OutboxFeed:
        if not self._outbox.is_open:
            self._holds_lock = False
            self._outbox.open()
        return self._outbox

    def _disconnect(self) -> None:
        if self._holds_lock:
            logger.info("outbox[%s] relay lock released", self._schema)
        self._holds_lock = False
        self._outbox.close()

    def _on_feed(self, call: Callable[[OutboxFeed], T]) -> T:
        """Run one call on the relay's session; on any database error drop the session (and
        with it the lock): a fresh one is made, and the lock re-taken, on the next round."""
        feed = self._connection()
        try:
            return call(feed)
        except GraphIngestError:
            self._disconnect()
            raise

    def _acquire_lock(self) -> bool:
        if self._holds_lock and self._outbox.is_open:
            return True
        if not self._on_feed(lambda feed: feed.try_lock(self._lock_key)):
            if not self._standby_logged:
                logger.info(
                    "outbox[%s] another relay holds lock %d: standing by (polling every %.1fs)",
                    self._schema,
                    self._lock_key,
                    self._standby_poll_s,
                )
                self._standby_logged = True
            return False
        try:
            self._producer.take_over()
        except GraphIngestError:
            self._disconnect()  # holding the lock without a producer would stall every relay
            raise
        self._holds_lock = True
        self._standby_logged = False
        logger.info(
            "outbox[%s] relay lock %d acquired: this relay is active, publishing as %s",
            self._schema,
            self._lock_key,
            self._producer.transactional_id,
        )
        return True

    def _fetch(self) -> list[OutboxRow]:
        return self._on_feed(lambda feed: feed.unpublished(self._batch_size))

    def _mark(self, ids: list[int]) -> int:
        return self._on_feed(lambda feed: feed.mark_published(ids))


__all__ = ["OutboxRelay", "advisory_lock_key"]
