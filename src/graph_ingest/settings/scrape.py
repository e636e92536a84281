"""What a Prometheus scrape may cost (``GRAPH_INGEST_SCRAPE__*``): the figures read at scrape time
(consumer lag from Kafka, the DLQ, outbox and parked operations from PostgreSQL) are cached for
``cache_s`` and read within ``timeout_s``."""

from __future__ import annotations

from pydantic import Field

from graph_ingest.settings.section import Section


class ScrapeSettings(Section):
    cache_s: float = Field(
        default=5.0,
        ge=0,
        description="how long a figure read at scrape time is served again before it is read"
        " anew (0: every scrape reads); a failed read is remembered as long",
    )
    timeout_s: float = Field(
        default=3.0,
        gt=0,
        description="how long one scrape may spend reading Kafka or PostgreSQL; past it the"
        " figures are left out and the error counter goes up (keep it below Prometheus'"
        " scrape_timeout, 10 s by default)",
    )
