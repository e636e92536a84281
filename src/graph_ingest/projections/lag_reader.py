"""The lag of the operations projection, gathered: its positions from the read tables, what
waits after them from the topic (a group-less reader: it joins no group and commits nothing),
decided by ``projections.lag.lag_of``; and, while ``projections rebuild`` runs, the rebuild's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import open_consumer
from graph_ingest.kafka.errors import KafkaIngestError, translate_kafka_error
from graph_ingest.projections.events import message_time
from graph_ingest.projections.lag import ProjectionLag, Unfolded, lag_of
from graph_ingest.projections.tables import OPERATION_STATUS, ReadTables, rebuild_schema
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import KafkaSettings
from graph_ingest.store.errors import StoreError

_POLL_S = 0.2
_READ_TIMEOUT_S = 5.0
"""How long a readiness probe may spend reading the lag (once every few seconds)."""


class LagForReadiness:
    """The projector's lag as its ``/health/ready`` shows it (``{"lag": [...]}``), read again
    at most every ``max_age_s``: reading it opens a Kafka client, and a probe must answer fast
    and often. One request at a time reads; the others meanwhile get the last value read. A lag
    that cannot be read (Kafka or PostgreSQL away) is shown as the error: readiness reports it,
    it does not decide on it. Call ``close`` when the worker stops."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_age_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._tables = ReadTables(settings.postgres)
        self._max_age_s = max_age_s
        self._clock = clock
        self._reading = threading.Lock()
        self._read_at: float | None = None
        self._last: dict[str, Any] = {"lag": "not read yet"}

    def __call__(self) -> dict[str, Any]:
        due = self._read_at is None or self._clock() - self._read_at >= self._max_age_s
        if due and self._reading.acquire(blocking=False):
            try:
                self._last = {"lag": self._read()}
                self._read_at = self._clock()
            finally:
                self._reading.release()
        return self._last

    def _read(self) -> list[dict[str, Any]] | str:
        try:
            self._tables.start()
            lags = projections_lag(self._settings, self._tables, timeout_s=_READ_TIMEOUT_S)
        except GraphIngestError as exc:
            return f"unavailable: {exc}"
        return [asdict(lag) for lag in lags]

    def close(self) -> None:
        self._tables.close()


REBUILD_SUFFIX = " (rebuild)"
"""Names the lag of a rebuild's tables beside the live projection's."""


def projections_lag(
    settings: Settings, tables: ReadTables, *, timeout_s: float = 30
) -> list[ProjectionLag]:
    """The lag of the live projection and, while a rebuild builds its tables, theirs."""
    lags = [operations_lag(settings, tables, timeout_s=timeout_s)]
    rebuild = tables.beside(rebuild_schema(settings.postgres))
    if rebuild.being_rebuilt():
        lags.append(operations_lag(settings, rebuild, timeout_s=timeout_s, rebuilding=True))
    return lags


def operations_lag(
    settings: Settings, tables: ReadTables, *, timeout_s: float = 30, rebuilding: bool = False
) -> ProjectionLag:
    """The lag of the operations projection now (``tables`` started); ``rebuilding``: of a
    rebuild's tables (none yet, while it makes them: nothing done)."""
    topic = settings.topics.operations
    try:
        folded = tables.progress(OPERATION_STATUS, topic)
    except StoreError:
        if not rebuilding:
            raise
        folded = []
    positions = {f.partition[1]: f.offset for f in folded}
    waiting = unfolded(settings.kafka, topic, positions, timeout_s=timeout_s)
    return lag_of(
        OPERATION_STATUS + (REBUILD_SUFFIX if rebuilding else ""),
        folded,
        waiting,
        now=datetime.now(UTC),
        stalled_s=settings.projector.stalled_after_s,
        rebuilding=rebuilding,
    )


def unfolded(
    settings: KafkaSettings, topic: str, folded: Mapping[int, int], *, timeout_s: float
) -> list[Unfolded]:
    """Per partition with a committed message after its folded offset (``folded``: partition ->
    last offset folded): the offsets to the end, and that first message's time."""
    consumer = open_consumer(
        settings.consumer_config(
            f"{settings.client_id}.lag.{uuid.uuid4().hex}", **{"enable.partition.eof": True}
        ),
        context=f"reading the lag of {topic}",
    )
    try:
        ranges = unread_ranges(consumer, topic, folded, timeout_s)
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ranges.items()])
        first = _first_times(consumer, topic, set(ranges), time.monotonic() + timeout_s)
    except KafkaException as exc:
        raise translate_kafka_error(exc, context=f"reading the lag of {topic}") from exc
    finally:
        consumer.close()
    return [Unfolded(end - start, first[p]) for p, (start, end) in ranges.items() if p in first]


def unread_ranges(
    consumer: Consumer, topic: str, folded: Mapping[int, int], timeout_s: float
) -> dict[int, tuple[int, int]]:
    """Partition -> (first offset not folded, end offset), for partitions not read to the end."""
    metadata = consumer.list_topics(topic, timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise KafkaIngestError(f"topic {topic} does not exist", code=StatusCode.NOT_FOUND)
    ranges = {}
    for partition in sorted(found.partitions):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=timeout_s
        )
        start = max(folded.get(partition, -1) + 1, low)
        if start < high:
            ranges[partition] = (start, high)
    return ranges


def _first_times(
    consumer: Consumer, topic: str, pending: set[int], deadline: float
) -> dict[int, datetime | None]:
    """The time of the first committed message of each ``pending`` partition; a partition that
    reaches its end first (only transaction markers or aborted records left) is left out."""
    first: dict[int, datetime | None] = {}
    while pending:
        if time.monotonic() >= deadline:
            raise KafkaIngestError(
                f"{topic}: the lag of {len(pending)} partitions not read in time",
                code=StatusCode.DEADLINE_EXCEEDED,
            )
        message = consumer.poll(_POLL_S)
        if message is None:
            continue
        partition = message.partition() or 0
        error = message.error()
        if partition not in pending:
            continue
        if error is None:
            first[partition] = message_time(message)
        elif error.fatal():
            raise translate_kafka_error(error, context=f"reading the lag of {topic}")
        elif error.code() != KafkaError._PARTITION_EOF:
            continue  # a broker away for a moment: librdkafka retries, the deadline bounds it
        pending.discard(partition)
    return first


__all__ = ["REBUILD_SUFFIX", "operations_lag", "projections_lag", "unfolded", "unread_ranges"]
