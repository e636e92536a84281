"""Kafka settings: the client (``GRAPH_INGEST_KAFKA__*``, turned into librdkafka dicts in one
place) and the pipeline's topics with their retry ladder (``GRAPH_INGEST_TOPICS__*``).

The consumer group protocol is chosen by ``group_protocol``:

* ``classic`` (the default): the client-side protocol with the cooperative-sticky assignor; the
  session timeout and the assignor are client settings (``session_timeout_ms``).
* ``consumer``: the next-generation protocol (KIP-848; Kafka 4.0+ brokers): the group
  coordinator computes assignments (``group_remote_assignor``, or the broker's default) and owns
  the session timeout and heartbeat interval (broker or per-group settings
  ``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms``).
  librdkafka refuses the classic client settings under it, so none is sent, and ``extra`` may
  not carry one.

Both hand partitions over incrementally, so the rebalance callbacks are the same.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, model_validator

from graph_ingest.settings.section import Section

# Consumer settings librdkafka refuses under group.protocol=consumer (the broker decides them).
CLASSIC_ONLY = (
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
)

KAFKA_CLIENT_LOGGER = "graph_ingest.kafka.client"
"""The logger of the Kafka clients' own lines (librdkafka's, through confluent-kafka's ``logger``
setting) and of their errors: never stderr directly, de-duplicated (``observability.logs``)."""


class KafkaSettings(Section):
    bootstrap_servers: str = "127.0.0.1:29092"
    client_id: str = "graph-ingest"
    group_protocol: Literal["classic", "consumer"] = Field(
        default="classic",
        description="consumer group protocol: classic (cooperative-sticky) or consumer (KIP-848, "
        "assignment and session timeout on the broker)",
    )
    session_timeout_ms: int = Field(
        default=10_000,
        description="classic protocol only: under the consumer protocol the broker's "
        "group.consumer.session.timeout.ms applies",
    )
    group_remote_assignor: Literal["uniform", "range"] | None = Field(
        default=None,
        description="consumer protocol only: the broker-side assignor (unset: the broker's "
        "default, uniform)",
    )
    max_poll_interval_ms: int = 300_000
    extra: dict[str, Any] = Field(
        default_factory=dict, description="passed verbatim to librdkafka (e.g. security settings)"
    )

    @model_validator(mode="after")
    def check_group_protocol(self) -> KafkaSettings:
        if self.group_protocol == "consumer":
            if refused := sorted(set(self.extra) & set(CLASSIC_ONLY)):
                raise ValueError(
                    f"kafka extra sets {', '.join(refused)}, which the consumer group protocol "
                    "does not take (the broker decides them): remove them or use "
                    "group_protocol=classic"
                )
        elif self.group_remote_assignor is not None:
            raise ValueError(
                "kafka group_remote_assignor applies to the consumer group protocol only: "
                "set group_protocol=consumer or unset it"
            )
        return self

    def common_config(self) -> dict[str, Any]:
        """What every client of ours is configured with, its log lines sent to Python logging
        (librdkafka would print them raw on stderr)."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "logger": logging.getLogger(KAFKA_CLIENT_LOGGER),
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
            "max.poll.interval.ms": self.max_poll_interval_ms,
            **self._group_protocol_config(),
            **overrides,
        }

    def _group_protocol_config(self) -> dict[str, Any]:
        if self.group_protocol == "consumer":
            assignor = self.group_remote_assignor
            return {
                "group.protocol": "consumer",
                **({"group.remote.assignor": assignor} if assignor else {}),
            }
        return {
            "group.protocol": "classic",
            "session.timeout.ms": self.session_timeout_ms,
            "partition.assignment.strategy": "cooperative-sticky",
        }


class TopicSettings(Section):
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
    control: str = Field(
        default="ingestion.control",
        description="operators' forced circuit-breaker modes, compacted, keyed by dependency; "
        "every worker reads it whole",
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
        topics = [topic for topic, _ in self.retry_tiers]
        if twice := next((t for i, t in enumerate(topics) if t in topics[:i]), None):
            raise ValueError(
                f"retry delays {self.retry_delays_s} name tier topic {twice} twice: give each "
                "tier its own delay (a ladder such as 1, 5, 30)"
            )
        return self

    @property
    def retry_tiers(self) -> list[tuple[str, float]]:
        """(topic, delay) of each tier: ``<plans>.retry.<delay>`` such as ingestion.plans.retry.5s."""
        return [(f"{self.plans}.retry.{_delay_label(d)}", d) for d in self.retry_delays_s]

    @property
    def dlq(self) -> str:
        return f"{self.plans}.dlq"

    @property
    def projected(self) -> tuple[str, str, str]:
        """The topics the projector folds: operations, the DLQ and degradation (in that order;
        ``projections.read_folds`` names the projection of each)."""
        return (self.operations, self.dlq, self.degradation)


def _delay_label(delay_s: float) -> str:
    if delay_s == int(delay_s):
        return f"{int(delay_s)}s"
    return f"{round(delay_s * 1000)}ms"
