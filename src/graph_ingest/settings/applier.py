"""The applier worker's settings (``GRAPH_INGEST_APPLIER__*``): its consumer group, batches,
breakers and degradation, and the worker id its failure records carry."""

from __future__ import annotations

import os
import socket

from pydantic import Field

from graph_ingest.settings.section import Section


class ApplierSettings(Section):
    group_id: str = "graph-ingest-applier"
    batch_max_plans: int = Field(default=200, ge=1)
    batch_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    batch_max_locks: int = Field(
        default=4_000,
        ge=1,
        description="PostgreSQL locks a batch may take: one per entity node its plans register,"
        " one per node their conditional deletes check (an edge's two ends). Every worker's"
        " batches share PostgreSQL's lock table (max_locks_per_transaction x (max_connections +"
        " max_prepared_transactions): 6,400 by default, 12,800 in the local stack and compose);"
        " a batch past it fails with 'out of shared memory' and is retried, then split. Keep"
        " appliers x this under the table; a lone plan above it is applied alone",
    )
    batch_linger_s: float = Field(default=0.05, ge=0)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    retry_initial_backoff_s: float = Field(default=0.5, gt=0)
    retry_max_backoff_s: float = Field(default=30.0, gt=0)
    breaker_failure_threshold: int = Field(
        default=3,
        ge=1,
        description="consecutive outage-class failures of a dependency that open its breaker",
    )
    breaker_probe_interval_s: float = Field(
        default=1.0, gt=0, description="how often an open breaker probes its dependency"
    )
    degradation_stable_s: float = Field(
        default=60.0,
        gt=0,
        description="how long every breaker must stay closed before a degraded worker reports L0"
        " again (a worse level, or a better one that is not L0, is reported at once)",
    )
    in_place_max_attempts: int = Field(
        default=3,
        ge=1,
        description="tries of a batch failing with INTERNAL, DEADLINE_EXCEEDED, ABORTED or "
        "RESOURCE_EXHAUSTED before it is split to find the plan that causes it",
    )
    max_internal_attempts: int = Field(
        default=2,
        ge=1,
        description="deliveries of a plan failing alone with INTERNAL (a bug, ours or a "
        "service's) before it goes to the DLQ instead of the next retry tier",
    )
    max_plan_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        description="a plan message larger than this goes to the DLQ undecoded (Kafka's default "
        "message.max.bytes is about 1 MiB too)",
    )
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        description="names this worker in failure records and degradation events",
    )

    @property
    def retry_group_id(self) -> str:
        """The group in which appliers consume the retry tiers (``wiring`` runs that loop)."""
        return f"{self.group_id}.retry"
