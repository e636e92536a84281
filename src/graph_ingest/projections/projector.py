"""The projector worker: folds ``ingestion.operations``, the DLQ topic and
``ingestion.degradation`` into the read tables (``projections.read_folds``), in a consumer group
of its own (``PROJECTOR__GROUP_ID``), on the runtime every worker shares.

* **Positions**: the read tables' ``tracking_positions`` are the truth. An assigned partition
  starts at its stored position + 1, or at the beginning when it has none (a new read schema
  folds the whole topic, whatever the group committed). Offsets are committed to Kafka too, after
  each batch's transaction, so they only ever trail the table; should the table be unreachable
  during a rebalance, the partition starts at the committed offset (a refold is harmless).
* **A batch** is folded, with its positions, in one transaction (``projections.tables``);
  redelivered and reordered events are harmless (``projections.fold``).
* **PostgreSQL down** (a transient error): the batch is read again from its first offsets after
  a backoff, every partition paused meanwhile so the worker stays in its group.
* **An event the tables refuse** (a permanent error): the batch is folded event by event; the
  one that still fails is logged and skipped, its position recorded: never a crash loop.
* **SIGTERM** (``stop``): the batch in hand is folded and committed, then the worker leaves.
* **Tables being rebuilt** (``projections rebuild`` holds their lock): refused at start; the
  projector folds the live tables while a rebuild builds its own beside them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING

from graph_ingest.consumers.runtime import RebalanceHooks, paused_wait
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.hooks import Hooks
from graph_ingest.kafka.consumer import TypedConsumer
from graph_ingest.kafka.records import Partition, Position
from graph_ingest.projections.read_events import ReadDecoder, ReadEvent, describe, skipped
from graph_ingest.projections.read_folds import ReadFolds, projections_by_topic
from graph_ingest.projections.tables import ReadTables
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.settings import Settings
from graph_ingest.store.errors import StoreError

log = logging.getLogger(__name__)


def projected_topics(settings: Settings) -> list[str]:
    """Every topic the projector folds (``projections rebuild`` reads the same ones)."""
    return list(projections_by_topic(settings.topics))


class Projector:
    """Constructing it touches nothing; ``run`` joins the group and folds until ``stop``."""

    def __init__(self, settings: Settings, tables: ReadTables, *, hooks: Hooks) -> None:
        self._settings = settings.projector
        self._tables = tables
        self._folds = ReadFolds(tables, settings.topics)
        self._hooks = hooks
        self._backoff = Backoff(
            self._settings.retry_initial_backoff_s, self._settings.retry_max_backoff_s
        )
        rebalance = RebalanceHooks(hooks, on_revoke=lambda _revoked: None)  # nothing held back
        self._consumer: TypedConsumer[ReadEvent] = TypedConsumer(
            settings.kafka.consumer_config(self._settings.group_id),
            projected_topics(settings),
            on_revoke=rebalance.revoked,
            on_assign=rebalance.assigned,
            starting_offsets=self._starting_offsets,
            decode=ReadDecoder(settings.topics),
        )

    def run(self, stop: threading.Event) -> None:
        if self._tables.being_rebuilt():
            raise GraphIngestError(
                f"{self._tables.schema} is being rebuilt by `graph-ingest projections rebuild`: "
                "no projector folds into a rebuild's tables (run it against the live ones)",
                code=StatusCode.FAILED_PRECONDITION,
            )
        self._consumer.start()
        try:
            while not stop.is_set():
                s = self._settings
                events = self._consumer.consume(
                    s.batch_max_events, s.poll_timeout_s, s.batch_linger_s
                )
                self._hooks.polled()
                self._hooks.consumed(len(events))
                if events:
                    self._fold(events, stop)
        finally:
            self._consumer.close()

    def _starting_offsets(self, partitions: frozenset[Partition]) -> Mapping[Partition, int]:
        try:
            stored = self._folds.positions(partitions)
        except StoreError as exc:
            log.warning("read positions unavailable (%s): starting at committed offsets", exc)
            return {}
        return {p: stored[p] + 1 if p in stored else OFFSET_BEGINNING for p in partitions}

    def _fold(self, events: Sequence[ReadEvent], stop: threading.Event) -> None:
        started = time.monotonic()
        try:
            outcomes = fold_batch(self._folds, events)
        except StoreError as exc:  # transient: PostgreSQL down, a lock timeout
            self._wait_out(events, exc, stop)
            return
        attempts = self._backoff.succeeded() + 1
        self._hooks.batch_handled(outcomes, time.monotonic() - started, attempts)
        self._hooks.committed(self._consumer.commit(_next_offsets(events)))

    def _wait_out(
        self, events: Sequence[ReadEvent], exc: StoreError, stop: threading.Event
    ) -> None:
        """Read the batch again after a backoff, every partition paused meanwhile."""
        delay = self._backoff.failed()
        log.warning(
            "folding %d events failed (%s, failure %d): again in %.1fs",
            len(events),
            exc,
            self._backoff.failures,
            delay,
        )
        self._rewind(events)
        paused_wait(
            self._consumer,
            stop,
            poll=self._poll_paused,
            timeout_s=delay,
        )

    def _poll_paused(self, timeout_s: float) -> None:
        """One poll round while paused: it keeps the group and the heartbeat (``polled``) going;
        whatever still arrives is fetched again after the wait."""
        self._rewind(self._consumer.consume(1, timeout_s))
        self._hooks.polled()

    def _rewind(self, events: Sequence[ReadEvent]) -> None:
        """Fetch ``events`` again (each partition from its first of them)."""
        first: dict[Partition, int] = {}
        for event in events:
            partition = (event.topic, event.partition)
            first[partition] = min(first.get(partition, event.offset), event.offset)
        self._consumer.rewind(first)


def fold_batch(folds: ReadFolds, events: Sequence[ReadEvent]) -> dict[Position, str]:
    """Fold ``events`` into every projection of their topics; should the tables refuse the
    batch (a permanent error), event by event. A transient error is raised: read the batch
    again."""
    try:
        return folds.fold(events)
    except StoreError as exc:
        if exc.code.is_transient:
            raise
        return _fold_one_by_one(folds, events)


def _fold_one_by_one(folds: ReadFolds, events: Sequence[ReadEvent]) -> dict[Position, str]:
    """Fold each event alone; one the tables still refuse is skipped (logged, its position
    recorded). A transient error meanwhile is raised: the batch is read again."""
    outcomes: dict[Position, str] = {}
    for event in events:
        try:
            outcomes |= folds.fold([event])
        except StoreError as exc:
            if exc.code.is_transient:
                raise
            log.error("%s: the read tables refuse the event (%s): skipped", describe(event), exc)
            outcomes |= folds.fold([skipped(event)])
    return outcomes


def _next_offsets(events: Sequence[ReadEvent]) -> dict[Partition, int]:
    offsets: dict[Partition, int] = {}
    for event in events:
        partition = (event.topic, event.partition)
        offsets[partition] = max(offsets.get(partition, 0), event.offset + 1)
    return offsets


__all__ = ["Projector", "fold_batch", "projected_topics"]
