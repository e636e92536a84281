"""Every tunable in one place: pydantic-settings, env prefix GRAPH_INGEST_, nested with "__".

Examples: GRAPH_INGEST_KAFKA__BOOTSTRAP_SERVERS=host:9092, GRAPH_INGEST_APPLIER__BATCH_MAX_PLANS=50,
GRAPH_INGEST_STACK__KAFKA_PORT=29092. Client addresses default to the local stack's ports, so
changing a stack port moves the clients with it unless they are set explicitly.
"""

from __future__ import annotations

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from graph_ingest.settings.api import ApiSettings
from graph_ingest.settings.applier import ApplierSettings
from graph_ingest.settings.gc import GcSettings
from graph_ingest.settings.health import HealthSettings
from graph_ingest.settings.kafka import KafkaSettings, TopicSettings
from graph_ingest.settings.llm import LlmSettings
from graph_ingest.settings.logs import LogSettings
from graph_ingest.settings.metrics import MetricsSettings
from graph_ingest.settings.neo4j import Neo4jSettings
from graph_ingest.settings.planner import PlannerSettings
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.settings.projector import ProjectorSettings
from graph_ingest.settings.recovery import DlqSettings, RecoverySettings
from graph_ingest.settings.relay import RelaySettings
from graph_ingest.settings.scrape import ScrapeSettings
from graph_ingest.settings.stack import StackSettings


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
    projector: ProjectorSettings = ProjectorSettings()
    relay: RelaySettings = RelaySettings()
    recovery: RecoverySettings = RecoverySettings()
    dlq: DlqSettings = DlqSettings()
    llm: LlmSettings = LlmSettings()
    health: HealthSettings = HealthSettings()
    metrics: MetricsSettings = MetricsSettings()
    api: ApiSettings = ApiSettings()
    scrape: ScrapeSettings = ScrapeSettings()
    log: LogSettings = LogSettings()
    gc: GcSettings = GcSettings()

    @model_validator(mode="after")
    def reindex_finds_what_it_missed(self) -> Settings:
        """``dlq reindex`` lays the rows published during its read over it: they must still be
        in the outbox when it ends."""
        if self.relay.published_retention_s <= self.dlq.reindex_timeout_s:
            raise ValueError(
                f"relay.published_retention_s ({self.relay.published_retention_s:g}) must exceed"
                f" dlq.reindex_timeout_s ({self.dlq.reindex_timeout_s:g}): a reindex reads the"
                " outbox rows published while it read the DLQ topic"
            )
        return self

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
