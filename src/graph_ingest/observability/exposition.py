"""``/metrics`` over HTTP beside a worker: prometheus_client's own WSGI server (a daemon thread,
a thread per scrape) on ``GRAPH_INGEST_METRICS__HOST:PORT``, serving one registry. Collectors
read at scrape time (lag, store gauges) are registered for the block and closed after it."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, disable_created_metrics, start_http_server
from prometheus_client.registry import Collector

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.settings.metrics import MetricsSettings

log = logging.getLogger(__name__)


def without_created_series() -> None:
    """Leave out prometheus_client's ``<counter>_created`` and ``<histogram>_created`` series:
    a second series per counter and histogram child that no dashboard or alert of ours reads.
    Process-wide (the library's own switch), so only the CLI calls it, as it alone configures
    logging."""
    disable_created_metrics()  # type: ignore[no-untyped-call]


@contextmanager
def serving_metrics(
    settings: MetricsSettings,
    registry: CollectorRegistry,
    collectors: Sequence[Collector] = (),
) -> Iterator[int | None]:
    """Serve ``registry`` (and ``collectors``, registered on it) at ``/metrics`` while the block
    runs; yields the port bound (the one set, or the free one chosen for 0), None when
    ``settings.port`` is unset (nothing served). Each collector with a ``close`` is closed at the
    end, served or not."""
    try:
        for collector in collectors:
            registry.register(collector)
        if settings.port is None:
            yield None
            return
        try:
            server, _ = start_http_server(settings.port, settings.host, registry)
        except OSError as exc:
            raise ConfigurationError(
                f"metrics cannot listen on {settings.host}:{settings.port} ({exc.strerror or exc}):"
                " choose another --metrics-port / GRAPH_INGEST_METRICS__PORT"
            ) from exc
        port = int(server.server_address[1])
        log.info("metrics on http://%s:%d/metrics", settings.host, port)
        try:
            yield port
        finally:
            server.shutdown()
            server.server_close()
    finally:
        for collector in collectors:
            close = getattr(collector, "close", None)
            if callable(close):
                close()


__all__ = ["serving_metrics", "without_created_series"]
