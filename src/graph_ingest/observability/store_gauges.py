"""What waits in the store, as Prometheus gauges read at scrape time (cached a few seconds, one
statement: ``store.backlog``):

* ``graph_ingest_dlq_entries{status,code}``: rows of the DLQ index; ``status`` is the entry's
  status as :data:`STATUS_LABELS` names it (``pending``: PENDING_REVIEW, what the alerts and the
  dashboard select; ``replayed``; ``resolved``: purged), ``code`` its status code as the CLI and
  the API show it (``INVALID_ARGUMENT``); every known pair is exported, at 0 when it has no rows;
* ``graph_ingest_dlq_oldest_pending_timestamp_seconds``: unix time the oldest entry pending review
  was dead-lettered (0: none pending);
* ``graph_ingest_outbox_backlog_rows``, ``graph_ingest_outbox_oldest_age_seconds``: outbox rows
  not published yet, and how long the oldest has waited (0 when none);
* ``graph_ingest_parked_operations``: operations PARKED behind an earlier version;
* ``graph_ingest_store_scrape_errors_total``: reads that failed (PostgreSQL away, out of time);
  the gauges above are absent until a read succeeds again.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.observability.scrape_cache import ScrapeCache
from graph_ingest.settings import Settings
from graph_ingest.store.backlog import BacklogReader, StoreBacklog
from graph_ingest.store.postgres.backlog import PostgresBacklog

STATUS_LABELS = {
    DlqStatus.PENDING_REVIEW.value: "pending",
    DlqStatus.REPLAYED.value: "replayed",
    DlqStatus.RESOLVED.value: "resolved",
}
"""The ``status`` label of each DLQ status (one the map does not know: its value in lower case)."""
KNOWN_ENTRIES = [
    (s.value, c.value) for s in DlqStatus for c in StatusCode if c is not StatusCode.OK
]
"""The (status, code) pairs exported even without rows: a DLQ entry never has code OK."""


class StoreGauges(Collector):
    """The prometheus_client collector of ``reader``'s backlog, read at most every ``cache_s``."""

    def __init__(self, reader: BacklogReader, *, cache_s: float = 5.0) -> None:
        self._reader = reader
        self._cache = ScrapeCache(reader.backlog, max_age_s=cache_s, what="the store's backlog")

    @property
    def errors(self) -> int:
        return self._cache.errors

    def close(self) -> None:
        self._reader.close()

    def describe(self) -> Iterable[Metric]:
        return [*_gauges(), _errors(0)]

    def collect(self) -> Iterable[Metric]:
        backlog = self._cache.get()
        errors = _errors(self._cache.errors)
        if backlog is None:
            return [errors]
        return [*_gauges(backlog), errors]


def _gauges(backlog: StoreBacklog | None = None) -> list[Metric]:
    entries = GaugeMetricFamily(
        "graph_ingest_dlq_entries",
        "Rows of the DLQ index by status (pending, replayed, resolved) and error code",
        labels=["status", "code"],
    )
    gauges = [
        GaugeMetricFamily(
            "graph_ingest_dlq_oldest_pending_timestamp_seconds",
            "Unix time the oldest DLQ entry pending review was dead-lettered (0: none pending)",
        ),
        GaugeMetricFamily(
            "graph_ingest_outbox_backlog_rows", "Outbox rows not published to Kafka yet"
        ),
        GaugeMetricFamily(
            "graph_ingest_outbox_oldest_age_seconds",
            "How long the oldest unpublished outbox row has waited (0 when none)",
        ),
        GaugeMetricFamily(
            "graph_ingest_parked_operations",
            "Operations parked behind an earlier version of their document",
        ),
    ]
    if backlog is None:
        return [entries, *gauges]
    counts = dict.fromkeys(KNOWN_ENTRIES, 0) | dict(backlog.dlq_entries)
    for (status, code), rows in sorted(counts.items()):
        entries.add_metric([STATUS_LABELS.get(status, status.lower()), code], rows)
    values = [
        backlog.oldest_pending_dlq_at or 0.0,
        backlog.outbox_rows,
        backlog.outbox_oldest_age_s,
        backlog.parked_operations,
    ]
    for gauge, value in zip(gauges, values, strict=True):
        gauge.add_metric([], value)
    return [entries, *gauges]


def _errors(count: int) -> CounterMetricFamily:
    return CounterMetricFamily(
        "graph_ingest_store_scrape_errors",
        "Reads of the DLQ, outbox and parked figures that failed (those gauges are absent"
        " meanwhile)",
        value=count,
    )


def store_gauges(settings: Settings) -> StoreGauges:
    """The store gauges of ``settings``' schema on a connection of their own, cached and bounded by
    ``GRAPH_INGEST_SCRAPE__CACHE_S`` and ``__TIMEOUT_S``; ``close`` them when the process stops."""
    reader = PostgresBacklog(settings.postgres, timeout_s=settings.scrape.timeout_s)
    return StoreGauges(reader, cache_s=settings.scrape.cache_s)


__all__ = ["KNOWN_ENTRIES", "STATUS_LABELS", "StoreGauges", "store_gauges"]
