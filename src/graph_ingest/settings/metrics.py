"""A process's Prometheus endpoint (``GRAPH_INGEST_METRICS__*``): where ``/metrics`` listens."""

from __future__ import annotations

from pydantic import Field

from graph_ingest.settings.section import Section


class MetricsSettings(Section):
    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve /metrics (Prometheus text format) on this port (0: any free one);"
        " unset: no metrics endpoint (``worker --metrics-port`` sets it too). `graph-ingest"
        " serve` serves /metrics on the API's own port whatever this says",
    )
    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="the address to bind; 0.0.0.0 for a scrape from outside the host (a pod)",
    )
