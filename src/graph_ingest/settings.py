"""Every tunable in one place: pydantic-settings, env prefix GRAPH_INGEST_, nested with "__".

Examples: GRAPH_INGEST_KAFKA__BOOTSTRAP_SERVERS=host:9092, GRAPH_INGEST_APPLIER__BATCH_MAX_PLANS=50,
GRAPH_INGEST_STACK__KAFKA_PORT=29092. Client addresses default to the local stack's ports, so
changing a stack port moves the clients with it unless they are set explicitly.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.plan import GraphOptions


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StackSettings(_Section):
    """The local, Docker-free stack: where it lives and which ports it takes.

    Default ports sit below 32768, outside Linux's ephemeral range, so an outgoing connection
    of some other program cannot be holding one of them when the stack starts.
    """

    run_dir: Path = Path(".graph-ingest")
    cache_dir: Path = Path.home() / ".cache" / "graph-ingest"
    kafka_version: str = "4.1.1"
    neo4j_version: str = "5.26.19"
    kafka_port: int = 29092
    kafka_controller_port: int = 29093
    neo4j_bolt_port: int = 27687
    postgres_port: int = 25432
    startup_timeout_s: float = 120.0
    stop_timeout_s: float = Field(
        default=60.0, gt=0, description="SIGTERM grace period before SIGKILL when stopping"
    )
    maven_repo: Path | None = Field(
        default=None, description="Maven local repository for jar fetches (default: ~/.m2)"
    )


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:29092"
    client_id: str = "graph-ingest"
    session_timeout_ms: int = 10_000
    max_poll_interval_ms: int = 300_000
    extra: dict[str, Any] = Field(
        default_factory=dict, description="passed verbatim to librdkafka (e.g. security settings)"
    )

    def common_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            **self.extra,
        }

    def producer_config(self, **overrides: Any) -> dict[str, Any]:
        return {
            **self.common_config(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            # The Java client's partitioner: a plan keyed space/documentId lands on the same
            # partition whichever language produced it.
            "partitioner": "murmur2_random",
            **overrides,
        }

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        return {
            **self.common_config(),
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": self.session_timeout_ms,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            "partition.assignment.strategy": "cooperative-sticky",
            **overrides,
        }


class TopicSettings(_Section):
    requests: str = Field(
        default="ingest.requests",
        description="ingest requests (IngestRequested) from producers, keyed space/documentId",
    )
    plans: str = "ingestion.plans"
    operations: str = "ingestion.operations"
    degradation: str = Field(
        default="ingestion.degradation",
        description="degradation level changes of the applier workers, keyed by worker id",
    )
    request_partitions: int = Field(default=6, ge=1)
    plan_partitions: int = Field(default=6, ge=1)
    operation_partitions: int = Field(default=6, ge=1)
    degradation_partitions: int = Field(default=1, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    operations_segment_ms: int = Field(
        default=3_600_000, description="segment roll time of the compacted operation log"
    )
    operations_min_compaction_lag_ms: int = 0
    max_message_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description="the largest message (key, value and headers) produced to the requests and "
        "plans topics: a larger request is refused before it is sent, a larger plan goes through "
        "the claim check (stored in PostgreSQL, the event carries a reference). Keep it at or "
        "below the broker's message.max.bytes and librdkafka's (both about 1 MB by default)",
    )
    retry_delays_s: tuple[float, ...] = Field(
        default=(1.0, 5.0, 30.0),
        description="the retry ladder: one tier topic per delay, in order, then the DLQ",
    )

    @model_validator(mode="after")
    def check_retry_delays(self) -> TopicSettings:
        if any(delay <= 0 for delay in self.retry_delays_s):
            raise ValueError(f"retry delays must be positive, not {self.retry_delays_s}")
        return self

    @property
    def retry_tiers(self) -> list[tuple[str, float]]:
        """(topic, delay) of each tier: ``<plans>.retry.<delay>`` such as ingestion.plans.retry.5s."""
        return [(f"{self.plans}.retry.{_delay_label(d)}", d) for d in self.retry_delays_s]

    @property
    def dlq(self) -> str:
        return f"{self.plans}.dlq"


def _delay_label(delay_s: float) -> str:
    if delay_s == int(delay_s):
        return f"{int(delay_s)}s"
    return f"{round(delay_s * 1000)}ms"


class Neo4jSettings(_Section):
    uri: str = "bolt://127.0.0.1:27687"
    user: str = "neo4j"
    password: SecretStr | None = None
    database: Identifier = "neo4j"
    max_connection_pool_size: int = 20
    connection_timeout_s: float = 5.0
    transaction_timeout_s: float = 60.0

    def auth(self) -> tuple[str, str] | None:
        return None if self.password is None else (self.user, self.password.get_secret_value())


class PostgresSettings(_Section):
    host: str = "127.0.0.1"
    port: int = 25432
    dbname: str = "postgres"
    user: str = "postgres"
    password: SecretStr | None = None
    schema_name: Identifier = "graph_ingest"
    connect_timeout_s: int = 5
    statement_timeout_ms: int = Field(
        default=60_000, ge=0, description="0 = none; bounds a statement stuck behind a zombie"
    )
    lock_timeout_ms: int = Field(default=10_000, ge=0, description="0 = none")
    pool_min_size: int = 1
    pool_max_size: int = 4

    def conninfo(self) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            user=self.user,
            password=self.password.get_secret_value() if self.password else None,
            connect_timeout=self.connect_timeout_s,
            options=(
                # Quoted, as migrations and the relay quote it: an unquoted mixed-case name
                # would fold to lower case and name another schema.
                f'-c search_path="{self.schema_name}"'
                f" -c statement_timeout={self.statement_timeout_ms}"
                f" -c lock_timeout={self.lock_timeout_ms}"
            ),
            application_name="graph-ingest",
        )


class ApplierSettings(_Section):
    group_id: str = "graph-ingest-applier"
    batch_max_plans: int = Field(default=200, ge=1)
    batch_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
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


class RelaySettings(_Section):
    batch_size: int = Field(default=500, ge=1)
    idle_poll_interval_s: float = Field(default=0.1, gt=0)
    flush_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "how long one batch's Kafka transaction (or taking over as the active relay) may"
            " take before it is aborted and retried; keep it below the producer's"
            " transaction.timeout.ms (librdkafka default 60 s)"
        ),
    )
    retry_initial_backoff_s: float = Field(default=0.5, gt=0)
    retry_max_backoff_s: float = Field(default=30.0, gt=0)
    standby_poll_s: float = Field(
        default=1.0, gt=0, description="how often a standby relay tries to become the active one"
    )
    transactional_id_prefix: str = Field(
        default="graph-ingest-relay",
        min_length=1,
        description=(
            "a schema's relay publishes as Kafka transactional.id '<prefix>.<schema>'; every"
            " relay of one outbox must share it (that fences a relay that lost its lock), and"
            " deployments sharing a Kafka cluster and schema name must not"
        ),
    )

    def transactional_id(self, schema_name: str) -> str:
        """The Kafka transactional.id of the relay of ``schema_name``'s outbox."""
        return f"{self.transactional_id_prefix}.{schema_name}"


class RecoverySettings(_Section):
    """`graph-ingest resume` / `recover`: re-publishing the frozen plans of stranded operations."""

    older_than_s: float = Field(
        default=300.0,
        ge=0,
        description="recover takes operations whose last change is at least this old (default of"
        " --older-than); younger ones may still be in an applier's hands",
    )
    limit: int = Field(default=100, ge=1, description="operations one recover run claims at most")
    lease_s: float = Field(
        default=300.0,
        gt=0,
        description="how long a claimed operation is not claimed again by another recoverer: time"
        " for the re-published plan to reach an applier",
    )
    publish_timeout_s: float = Field(
        default=30.0, gt=0, description="how long one re-published plan may wait for Kafka's ack"
    )

    @model_validator(mode="after")
    def lease_outlasts_a_publish(self) -> RecoverySettings:
        if self.lease_s <= self.publish_timeout_s:
            raise ValueError(
                f"recovery.lease_s ({self.lease_s:g}) must be longer than"
                f" recovery.publish_timeout_s ({self.publish_timeout_s:g})"
            )
        return self


class DlqSettings(_Section):
    """`graph-ingest dlq`: replaying dead-lettered plans and rebuilding the DLQ index."""

    publish_timeout_s: float = Field(
        default=30.0, gt=0, description="how long one replayed plan may wait for Kafka's ack"
    )
    reindex_timeout_s: float = Field(
        default=300.0, gt=0, description="how long `dlq reindex` may take to read the DLQ topic"
    )


class LlmSettings(_Section):
    """The ``llm`` extractor: an OpenAI-compatible chat-completions endpoint.

    Example: GRAPH_INGEST_LLM__BASE_URL=http://127.0.0.1:8000/v1, GRAPH_INGEST_LLM__MODEL=my-model,
    GRAPH_INGEST_LLM__API_KEY=... (sent only in the Authorization header, never logged)."""

    base_url: str | None = Field(
        default=None,
        description="the API root; requests go to <base_url>/chat/completions (required by llm)",
    )
    model: str | None = Field(
        default=None, description="the model id sent with every request (required by llm)"
    )
    api_key: SecretStr | None = Field(
        default=None, description="sent as 'Authorization: Bearer <key>'; none for a local server"
    )
    connect_timeout_s: float = Field(default=5.0, gt=0)
    timeout_s: float = Field(
        default=120.0, gt=0, description="read/write timeout of one request (the model thinking)"
    )
    max_attempts: int = Field(
        default=4,
        ge=1,
        description="tries of one request on 429, 5xx, timeouts and connection errors before the"
        " extraction fails with the transient code (the planner worker then backs off)",
    )
    initial_backoff_s: float = Field(default=1.0, gt=0)
    max_backoff_s: float = Field(
        default=30.0, gt=0, description="caps the backoff and any Retry-After the endpoint sends"
    )
    max_prompt_chars: int = Field(
        default=64_000,
        ge=1_000,
        description="characters of the messages of one request (the instructions and the JSON"
        " schema derived from the graph schema included); a larger chunk is sent in pieces",
    )
    chunks_per_request: int = Field(
        default=8, ge=1, description="chunks sent together in one request, within max_prompt_chars"
    )
    max_output_tokens: int = Field(
        default=4_096, ge=1, description="the request's max_tokens: bounds what the model writes"
    )
    max_response_bytes: int = Field(
        default=1024 * 1024,
        ge=1_024,
        description="a larger response body is not read: recorded as malformed output",
    )


class PlannerSettings(_Section):
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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GRAPH_INGEST_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )

    stack: StackSettings = StackSettings()
    kafka: KafkaSettings = KafkaSettings()
    topics: TopicSettings = TopicSettings()
    neo4j: Neo4jSettings = Neo4jSettings()
    postgres: PostgresSettings = PostgresSettings()
    applier: ApplierSettings = ApplierSettings()
    planner: PlannerSettings = PlannerSettings()
    relay: RelaySettings = RelaySettings()
    recovery: RecoverySettings = RecoverySettings()
    dlq: DlqSettings = DlqSettings()
    llm: LlmSettings = LlmSettings()

    @model_validator(mode="after")
    def clients_follow_stack_ports(self) -> Settings:
        """Unless set explicitly, client addresses point at the local stack's ports."""
        stack = self.stack
        if "bootstrap_servers" not in self.kafka.model_fields_set:
            object.__setattr__(
                self,
                "kafka",
                self.kafka.model_copy(
                    update={"bootstrap_servers": f"127.0.0.1:{stack.kafka_port}"}
                ),
            )
        if "uri" not in self.neo4j.model_fields_set:
            object.__setattr__(
                self,
                "neo4j",
                self.neo4j.model_copy(update={"uri": f"bolt://127.0.0.1:{stack.neo4j_bolt_port}"}),
            )
        if "port" not in self.postgres.model_fields_set:
            object.__setattr__(
                self, "postgres", self.postgres.model_copy(update={"port": stack.postgres_port})
            )
        return self
