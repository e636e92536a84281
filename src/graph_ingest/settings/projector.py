"""The projector worker's settings (``GRAPH_INGEST_PROJECTOR__*``): its consumer group, its
batches, and how it waits out a PostgreSQL outage."""

from __future__ import annotations

import os
import socket

from pydantic import Field

from graph_ingest.settings.section import Section


class ProjectorSettings(Section):
    """`graph-ingest worker projector`: folds the operations topic into the read tables (schema
    ``<POSTGRES__SCHEMA_NAME>_read``). Run several with one ``group_id`` to share partitions."""

    group_id: str = Field(
        default="graph-ingest-projector",
        min_length=1,
        description="the projectors' consumer group (their own: they read every operation event)",
    )
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        description="names this worker in logs and lifecycle hooks",
    )
    batch_max_events: int = Field(
        default=500, ge=1, description="operation events folded in one transaction at most"
    )
    batch_linger_s: float = Field(default=0.05, ge=0)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    stalled_after_s: float = Field(
        default=60.0,
        gt=0,
        description="a projection behind its topic whose position has not moved for this long is"
        " reported stalled (graph-ingest projections status)",
    )
    retry_initial_backoff_s: float = Field(default=0.5, gt=0)
    retry_max_backoff_s: float = Field(
        default=30.0, gt=0, description="the longest wait between tries while PostgreSQL is down"
    )
