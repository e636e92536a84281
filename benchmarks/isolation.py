"""What every benchmark run stands on: its own topics, schema and consumer group; the graph
label of its workload; and the checks and sizes read from the services afterwards."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from neo4j import Driver, GraphDatabase
from workloads import expected_graph

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.graph import cypher
from graph_ingest.kafka.admin import delete_topics, ensure_topics, pipeline_topics
from graph_ingest.projections.tables import read_schema, rebuild_schema
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.migrate import migrate


def bench_stack() -> Settings:
    """A benchmark's start: its progress logged to stderr (the libraries' only when they warn),
    and the stack ``Settings()`` describes, started if needed."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    for noisy in ("graph_ingest", "neo4j", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    base = Settings()
    LocalStack(base).up()
    return base


@contextmanager
def isolated(base: Settings, *, kafka: bool = True, **applier: Any) -> Iterator[Settings]:
    """Topics (unless not ``kafka``), schema (and its read schemas) and groups of one run,
    dropped afterwards; ``applier`` overrides applier settings."""
    tag = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topics": base.topics.model_copy(
                update={
                    "requests": f"bench.{tag}.requests",
                    "plans": f"bench.{tag}.plans",
                    "operations": f"bench.{tag}.operations",
                    "degradation": f"bench.{tag}.degradation",
                }
            ),
            "postgres": base.postgres.model_copy(update={"schema_name": f"bench_{tag}"}),
            "applier": base.applier.model_copy(update={"group_id": f"bench.{tag}", **applier}),
            "planner": base.planner.model_copy(update={"group_id": f"bench.{tag}.planner"}),
            "projector": base.projector.model_copy(update={"group_id": f"bench.{tag}.projector"}),
        }
    )
    if kafka:
        ensure_topics(settings)
    migrate(settings.postgres)
    try:
        yield settings
    finally:
        if kafka:
            # only the run's own: the requests and control topics are the stack's, shared
            shared = set(pipeline_topics(base.topics))
            delete_topics(
                settings, [t for t in pipeline_topics(settings.topics) if t not in shared]
            )
        with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
            for schema in (rebuild_schema(settings.postgres), read_schema(settings.postgres)):
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA "{settings.postgres.schema_name}" CASCADE')


def driver(settings: Settings) -> Driver:
    return GraphDatabase.driver(settings.neo4j.uri, auth=settings.neo4j.auth())


@contextmanager
def graph_label(settings: Settings, label: str) -> Iterator[str]:
    """A workload's base label: the pipeline's uniqueness constraint on it, online before
    anything is timed; its nodes and constraint are dropped afterwards."""
    with driver(settings) as d:
        d.execute_query(cypher.constraint_query(label))
        d.execute_query("CALL db.awaitIndexes(300)")
    try:
        yield label
    finally:
        wipe_label(settings, label, drop_constraint=True)


def wipe_label(settings: Settings, label: str, *, drop_constraint: bool = False) -> None:
    """Delete every node of the label (and its edges), in transactions of 10,000 nodes."""
    with driver(settings) as d:
        with d.session() as session:  # CALL … IN TRANSACTIONS needs an auto-commit transaction
            session.run(
                f"MATCH (n:{cypher.quote(label, what='label')}) "
                "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
            ).consume()
        if drop_constraint:
            d.execute_query(f"DROP CONSTRAINT `{label}_{cypher.NODE_ID_PROPERTY}` IF EXISTS")


def graph_elements(settings: Settings, label: str) -> tuple[set[str], set[EdgeKey]]:
    base = cypher.quote(label, what="label")
    with driver(settings) as d:
        nodes, _, _ = d.execute_query(f"MATCH (n:{base}) RETURN n.node_id AS id")
        edges, _, _ = d.execute_query(
            f"MATCH (a:{base})-[r]->(b:{base}) "
            "RETURN a.node_id AS src, type(r) AS type, b.node_id AS dst, r.rank AS rank"
        )
    return {r["id"] for r in nodes}, {EdgeKey(**r.data()) for r in edges}


class NotExact(AssertionError):
    """A run left the graph or the operations other than its plans say."""


def check_graph(settings: Settings, label: str, plans: Sequence[IngestionPlan]) -> None:
    """The label holds exactly the nodes and edges ``plans`` (applied in order) leave."""
    want_nodes, want_edges = expected_graph(plans)
    nodes, edges = graph_elements(settings, label)
    if (nodes, edges) != (want_nodes, want_edges):
        raise NotExact(
            f"graph {label}: {len(nodes)} nodes / {len(edges)} edges, expected "
            f"{len(want_nodes)} / {len(want_edges)}; e.g. missing nodes "
            f"{sorted(want_nodes - nodes)[:3]}, extra {sorted(nodes - want_nodes)[:3]}, missing "
            f"edges {[str(e) for e in list(want_edges - edges)[:3]]}, extra "
            f"{[str(e) for e in list(edges - want_edges)[:3]]}"
        )


def check_completed(settings: Settings, plans: Sequence[IngestionPlan]) -> None:
    """Every plan's operation, and no other, is COMPLETED."""
    rows = sql(settings, "SELECT operation_id, stage FROM operations")
    stages = dict(rows)
    not_done = [p.operation_id for p in plans if stages.get(p.operation_id) != "COMPLETED"]
    if not_done or len(stages) != len(plans):
        raise NotExact(
            f"{len(not_done)} of {len(plans)} plans not COMPLETED (e.g. {not_done[:3]}); "
            f"{len(stages)} operations in all"
        )


def sql(settings: Settings, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def schema_bytes(settings: Settings) -> int:
    """pg_total_relation_size (heap, indexes, TOAST) of every table of the run's schema."""
    rows = sql(
        settings,
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        settings.postgres.schema_name,
    )
    return int(rows[0][0])
