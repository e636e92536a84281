"""The outbox relay's settings (``GRAPH_INGEST_RELAY__*``): batches, polling, transactions and
the transactional id that fences a relay which lost its lock."""

from __future__ import annotations

from pydantic import Field

from graph_ingest.settings.section import Section


class RelaySettings(Section):
    batch_size: int = Field(default=500, ge=1)
    idle_poll_interval_s: float = Field(
        default=0.5,
        gt=0,
        description=(
            "how long an idle active relay waits before looking at the outbox again; a commit"
            " that adds rows wakes it at once (LISTEN/NOTIFY), so this is only a safety net and"
            " bounds how long a stop waits for the relay"
        ),
    )
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
    published_retention_s: float = Field(
        default=3600.0,
        gt=0,
        description=(
            "how long a published outbox row is kept before the active relay deletes it; `dlq"
            " reindex` reads the rows published since it started, so keep this above"
            " DLQ__REINDEX_TIMEOUT_S"
        ),
    )
    purge_interval_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "how often the active relay deletes the published rows past their retention; a"
            " pass that finds more than one statement's worth goes on at once"
        ),
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
