"""Kafka settings: the client (``GRAPH_INGEST_KAFKA__*``, turned into librdkafka dicts in one
place) and the pipeline's topics with their retry ladder (``GRAPH_INGEST_TOPICS__*``).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field, model_validator

from graph_ingest.settings.section import Section

KAFKA_CLIENT_LOGGER = "graph_ingest.kafka.client"
"""The logger of the Kafka clients' own lines (librdkafka's, through confluent-kafka's ``logger``
setting) and of their errors: never stderr directly, de-duplicated (``observability.logs``)."""


class KafkaSettings(Section):
    bootstrap_servers: str = "127.0.0.1:29092"
    client_id: str = "graph-ingest"
    session_timeout_ms: int = 10_000
    max_poll_interval_ms: int = 300_000
    extra: dict[str, Any] = Field(
        default_factory=dict, description="passed verbatim to librdkafka (e.g. security settings)"
    )

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
            "session.timeout.ms": self.session_timeout_ms,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            "partition.assignment.strategy": "cooperative-sticky",
            **overrides,
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


def _delay_label(delay_s: float) -> str:
    if delay_s == int(delay_s):
        return f"{int(delay_s)}s"
    return f"{round(delay_s * 1000)}ms"
