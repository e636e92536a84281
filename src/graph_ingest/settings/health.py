"""A worker's health endpoints (``GRAPH_INGEST_HEALTH__*``): where they listen, and how old the
loop's heartbeat may be before the worker counts as stuck."""

from __future__ import annotations

from pydantic import Field

from graph_ingest.settings.section import Section


class HealthSettings(Section):
    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve /health/live, /health/ready and /health/startup on this port (0: any"
        " free one); unset: no health endpoints (``worker --health-port`` sets it too)",
    )
    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="the address to bind; 0.0.0.0 for a probe from outside the host (a pod)",
    )
    live_max_age_s: float = Field(
        default=120.0,
        gt=0,
        description="/health/live fails once the loop has not turned for this long. The loop polls"
        " between batches and while paused, so keep it above the longest single batch: the"
        " default covers NEO4J__TRANSACTION_TIMEOUT_S (60) with its retries and the planner's"
        " RETRY_MAX_BACKOFF_S (30); raise it for an LLM planner's long batches",
    )
