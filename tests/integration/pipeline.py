"""A pipeline of real services isolated for one test: its own topics, schema, group and label."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from confluent_kafka import Consumer, Producer
from neo4j import GraphDatabase

from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.base import GraphWriter
from graph_ingest.graph.errors import GraphError
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.hooks import LoopSubscriber
from graph_ingest.kafka.admin import delete_topics, ensure_topics, pipeline_topics
from graph_ingest.planning.request_planner import RequestPlanner
from graph_ingest.producers.plan_publisher import PlanPublisher
from graph_ingest.producers.relay import OutboxRelay
from graph_ingest.projections.tables import read_schema, rebuild_schema
from graph_ingest.schemas.codec import decode_operation
from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import pipeline_env
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery
from graph_ingest.store.migrate import migrate
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import (
    BUNDLED_GRAPH_SCHEMA,
    postgres_store,
    run_applier,
    run_planner,
    run_projector,
)


class CountingWriter(Neo4jGraphWriter):
    """The real Neo4j writer, counting how many plan mutations it was asked to write."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mutations_written = 0

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        super().apply(batch)
        self.mutations_written += len(batch)


class FailingWriter(CountingWriter):
    """The real Neo4j writer, made to fail on cue: for batches that touch ``culprits`` (a plan
    too big to ever fit a transaction; only its first ``fail_times`` writes when set: a transient
    fault), or for everything while ``sick`` is set (a sick database: its probe fails too)."""

    def __init__(
        self,
        settings: Settings,
        code: StatusCode,
        culprits: Sequence[str] = (),
        fail_times: int | None = None,
    ) -> None:
        super().__init__(settings.neo4j)
        self.code = code
        self.culprits = set(culprits)
        self.fail_times = fail_times
        self.sick = threading.Event()
        self.failures = 0

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        touched = {n.node_id for _, m in batch for n in m.node_upserts}
        culprit = bool(touched & self.culprits) and (
            self.fail_times is None or self.failures < self.fail_times
        )
        if self.sick.is_set() or culprit:
            self.failures += 1
            raise GraphError(f"injected {self.code}", code=self.code)
        super().apply(batch)

    def probe(self) -> None:
        if self.sick.is_set():
            self.failures += 1
            raise GraphError("injected: the probe fails too", code=self.code)
        super().probe()


# Short enough for a test to walk the whole ladder, long enough to tell the tiers apart.
TEST_RETRY_DELAYS_S = (0.3, 0.6, 1.2)


def isolated_settings(
    base: Settings,
    *,
    schema_prefix: str = "t_",
    plan_partitions: int = 3,
    retry_delays_s: tuple[float, ...] = TEST_RETRY_DELAYS_S,
    **applier: Any,
) -> Settings:
    tag = uuid.uuid4().hex[:10]
    return base.model_copy(
        update={
            "topics": base.topics.model_copy(
                update={
                    "requests": f"t.{tag}.requests",
                    "plans": f"t.{tag}.plans",
                    "operations": f"t.{tag}.operations",
                    "degradation": f"t.{tag}.degradation",
                    "control": f"t.{tag}.control",
                    "request_partitions": plan_partitions,
                    "plan_partitions": plan_partitions,
                    "operation_partitions": 3,
                    "retry_delays_s": retry_delays_s,
                }
            ),
            "postgres": base.postgres.model_copy(update={"schema_name": f"{schema_prefix}{tag}"}),
            "applier": base.applier.model_copy(
                update={"group_id": f"t.{tag}.applier", "batch_linger_s": 0.02, **applier}
            ),
            "planner": base.planner.model_copy(
                update={"group_id": f"t.{tag}.planner", "batch_linger_s": 0.02}
            ),
        }
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Pipeline:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.graph = GraphOptions(node_label=f"T_{settings.postgres.schema_name}")
        self.store: PostgresOperationStore = postgres_store(settings)
        self.writer: CountingWriter = CountingWriter(settings.neo4j)
        self._publisher = PlanPublisher(settings)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._relay: OutboxRelay | None = None
        self._retry_log = _Records()

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        logging.getLogger("graph_ingest.consumers.applier.worker").addHandler(self._retry_log)
        ensure_topics(self.settings)
        migrate(self.settings.postgres)
        self.store.start()
        self._publisher.start()

    def teardown(self) -> None:
        logging.getLogger("graph_ingest.consumers.applier.worker").removeHandler(self._retry_log)
        self.stop_workers()
        if self._relay:
            self._relay.close()
        self._publisher.close()
        self.store.close()
        delete_topics(self.settings, pipeline_topics(self.settings.topics))
        with psycopg.connect(self.settings.postgres.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.settings.postgres.schema_name}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{read_schema(self.settings.postgres)}" CASCADE')
            # (a rebuild stopped by a failing test leaves its tables beside the live ones)
            conn.execute(
                f'DROP SCHEMA IF EXISTS "{rebuild_schema(self.settings.postgres)}" CASCADE'
            )
        with self._driver() as driver:
            driver.execute_query(f"MATCH (n:`{self.graph.node_label}`) DETACH DELETE n")
            driver.execute_query(f"DROP CONSTRAINT `{self.graph.node_label}_node_id` IF EXISTS")

    def stop_workers(self) -> None:
        """Stop the applier and relay threads (teardown does it too)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def retries_logged(self) -> int:
        """How many times the applier retried a batch in place (it logs each one)."""
        return sum("retry" in r.getMessage() for r in self._retry_log.records)

    def start_applier(
        self,
        writer: GraphWriter | None = None,
        settings: Settings | None = None,
        subscribers: Sequence[LoopSubscriber] = (),
    ) -> threading.Thread:
        """An applier thread on the real services; ``writer`` replaces the counting Neo4j writer
        (fault injection), ``settings`` this pipeline's (e.g. another PostgreSQL user);
        ``subscribers`` watch its loops and its relay."""
        thread = threading.Thread(
            target=run_applier,
            args=(settings or self.settings, self._stop),
            kwargs={
                "graph": writer or self.writer,
                "subscribers": subscribers,
                "relay_subscribers": subscribers,
            },
            name="applier",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)
        return thread

    def start_planner(self, planner: RequestPlanner, settings: Settings | None = None) -> None:
        """A planner worker thread with ``planner`` (``settings``: e.g. another worker id)."""
        thread = threading.Thread(
            target=run_planner,
            args=(settings or self.settings, self._stop, planner),
            name="planner",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    def start_projector(self, settings: Settings | None = None) -> None:
        """A projector thread folding into this pipeline's read tables, in a group of its own
        (``settings``: e.g. a longer batch linger)."""
        from tests.integration.projection_helpers import projector_settings

        thread = threading.Thread(
            target=run_projector,
            args=(settings or projector_settings(self), self._stop),
            name="projector",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    def real_planner_settings(self, **planner: Any) -> Settings:
        """This pipeline's settings for the real planner (``build_planner``): the bundled graph
        schema, plans into this pipeline's graph label; ``planner``: other planner settings."""
        update = {"graph_schema": BUNDLED_GRAPH_SCHEMA, "graph": self.graph, **planner}
        return self.settings.model_copy(
            update={"planner": self.settings.planner.model_copy(update=update)}
        )

    def start_relay(self) -> None:
        self._relay = OutboxRelay(self.settings)
        self._relay.start()
        thread = threading.Thread(target=self._relay.run, args=(self._stop,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def env(self) -> dict[str, str]:
        """GRAPH_INGEST_* variables that make Settings() in a CLI or subprocess this pipeline's."""
        return pipeline_env(self.settings)

    # -- input -----------------------------------------------------------------------------

    def publish(self, *plans: IngestionPlan) -> None:
        self._publisher.publish(list(plans))

    def publish_in_steps(self, plans: Sequence[IngestionPlan], step: int = 50) -> threading.Thread:
        """Publish ``plans`` ``step`` at a time on a thread of their own (traffic that flows while
        the test acts); returns the started thread."""

        def publish() -> None:
            for first in range(0, len(plans), step):
                self.publish(*plans[first : first + step])

        thread = threading.Thread(target=publish)
        thread.start()
        return thread

    def publish_raw(
        self, key: bytes, value: bytes, headers: dict[str, str | bytes | None] | None = None
    ) -> None:
        producer = Producer(self.settings.kafka.producer_config())
        producer.produce(self.settings.topics.plans, key=key, value=value, headers=headers or {})
        assert producer.flush(30) == 0

    # -- observation -----------------------------------------------------------------------

    def wait_stage(self, operation_id: str, stage: Stage, timeout_s: float = 60) -> Operation:
        def reached() -> Operation | None:
            operation = self.store.get_operation(operation_id)
            return operation if operation and operation.stage is stage else None

        return wait_until(reached, timeout_s=timeout_s, what=f"{operation_id} to reach {stage}")

    def dlq_entries(self, count: int, timeout_s: float = 60) -> list[DlqEntry]:
        """The DLQ index once it holds at least ``count`` entries, in the order they arrived."""

        def enough() -> list[DlqEntry] | None:
            entries = self.store.list_dlq_entries(DlqQuery())
            # one routing transaction shares one dead_lettered_at: its source offsets order it
            entries.sort(key=lambda e: (e.dead_lettered_at, _offset_order(e), e.dlq_id))
            return entries if len(entries) >= count else None

        return wait_until(enough, timeout_s=timeout_s, what=f"{count} DLQ entries")

    def graph_elements(self) -> tuple[set[str], set[EdgeKey]]:
        label = self.graph.node_label
        with self._driver() as driver:
            nodes, _, _ = driver.execute_query(f"MATCH (n:`{label}`) RETURN n.node_id AS id")
            edges, _, _ = driver.execute_query(
                f"MATCH (a:`{label}`)-[r]->(b:`{label}`) "
                "RETURN a.node_id AS src, type(r) AS type, b.node_id AS dst, r.rank AS rank"
            )
        return {r["id"] for r in nodes}, {EdgeKey(**r.data()) for r in edges}

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.settings.postgres.conninfo()) as conn:
            return conn.execute(query, params).fetchall()

    def execute(self, statement: str, *params: Any) -> None:
        """A statement that returns no rows (DDL, GRANT), committed."""
        with psycopg.connect(self.settings.postgres.conninfo(), autocommit=True) as conn:
            conn.execute(statement, params)

    def operation_events(self, expected: int, timeout_s: float = 60) -> list[Operation]:
        """Consume the operation log from the start until ``expected`` events arrived."""
        consumer = Consumer(self.settings.kafka.consumer_config(f"reader-{uuid.uuid4().hex}"))
        consumer.subscribe([self.settings.topics.operations])
        events: list[Operation] = []
        try:

            def enough() -> bool:
                for message in consumer.consume(num_messages=500, timeout=0.5):
                    if message.error() is None and (value := message.value()) is not None:
                        events.append(decode_operation(value))
                return len(events) >= expected

            wait_until(enough, timeout_s=timeout_s, interval_s=0, what=f"{expected} events")
        finally:
            consumer.close()
        return events

    def _driver(self) -> Any:
        return GraphDatabase.driver(self.settings.neo4j.uri, auth=self.settings.neo4j.auth())


def _offset_order(entry: DlqEntry) -> tuple[bool, int]:
    """Entries with a source offset in offset order, followers (no offset) after them."""
    return (entry.original_offset is None, entry.original_offset or 0)
