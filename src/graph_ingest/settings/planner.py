"""The planner worker's settings (``GRAPH_INGEST_PLANNER__*``): the extractor, graph schema and
graph options it plans with, chunking and confidence, its consumer group and batches, replans
and transactional ids."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.settings.section import Section


class PlannerSettings(Section):
    """`graph-ingest worker planner` (GRAPH_INGEST_PLANNER__*): ingest requests in, frozen plans
    out, one Kafka transaction per batch. ``extractor``, ``min_confidence`` and
    ``chunk_max_chars`` shape the plan a document gets, so they are part of the extraction
    fingerprint: changing one re-plans documents that would otherwise be unchanged."""

    graph_schema: Path | None = Field(
        default=None,
        description="the graph schema file (YAML or JSON) the planner plans with, its extraction"
        " rules included (required by the default factory; the demo's is bundled:"
        " graph_ingest/demo/graph_schema.yaml)",
    )
    graph: GraphOptions = Field(
        default_factory=GraphOptions,
        description="where plans write in Neo4j: the database (GRAPH__DATABASE) and the label"
        " every node carries (GRAPH__NODE_LABEL)",
    )
    extractor: str = Field(
        default="rules",
        min_length=1,
        description="the extractor of requests that carry no candidates (rules, llm)",
    )
    min_confidence: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="candidates less confident than this are dropped (or fail the document)",
    )
    chunk_max_chars: int = Field(
        default=4000, ge=200, description="the longest chunk a document is split into"
    )
    group_id: str = "graph-ingest-planner"
    batch_max_requests: int = Field(default=50, ge=1)
    batch_linger_s: float = Field(default=0.05, ge=0)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    retry_initial_backoff_s: float = Field(default=0.5, gt=0)
    retry_max_backoff_s: float = Field(default=30.0, gt=0)
    retry_budget_s: float = Field(
        default=300.0,
        ge=0,
        description="how long a request failing with a transient error (the model endpoint down, "
        "429) is retried before it goes to the DLQ",
    )
    max_replans: int = Field(
        default=3,
        ge=0,
        description="how often the newest request of a document is planned again after its "
        "plan met a CONFLICT (the document moved on under it, e.g. across a rebalance) before "
        "it becomes a planning DLQ entry",
    )
    transaction_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="how long one batch's Kafka transaction (or initialising transactions) may "
        "take before it is aborted and the batch planned again",
    )
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        description="names this worker in failure records; with transactional_id_prefix it is "
        "the worker's Kafka transactional.id, so give each worker a stable one (a pod name): a "
        "restarted worker with the same id aborts its predecessor's open transaction at once, "
        "one with a new id leaves it to expire (transaction.timeout.ms), holding read_committed "
        "readers of the plans topic back until then",
    )
    transactional_id_prefix: str = Field(default="graph-ingest-planner", min_length=1)
    factory: str = Field(
        default="graph_ingest.wiring:build_planner",
        description="module:function that builds the planner from the settings",
    )

    @property
    def transactional_id(self) -> str:
        return f"{self.transactional_id_prefix}.{self.worker_id}"

    @property
    def conflicts_group_id(self) -> str:
        """The group in which planner workers read the operations topic for CONFLICTs."""
        return f"{self.group_id}.conflicts"
