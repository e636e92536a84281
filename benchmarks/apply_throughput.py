"""Apply throughput: one applier with batch size 1 vs the default batch size, next to the raw
Neo4j `UNWIND … MERGE` rate for the same elements, measured side by side in one run.

    python benchmarks/apply_throughput.py [--plans 1000] [--batch 200]

Uses the local stack (started if needed). Each applier run gets its own topics, schema, consumer
group and graph label. Applier time is measured from the first operation's creation to the last
COMPLETED stage time recorded in PostgreSQL, so consumer-group join time is not counted.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from neo4j import GraphDatabase

from graph_ingest.consumers.wiring import run_applier
from graph_ingest.domain.mutation import EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind
from graph_ingest.domain.state import DocumentState, EntityRegistration
from graph_ingest.kafka.admin import delete_topics, ensure_topics, pipeline_topics
from graph_ingest.producers.plan_publisher import PlanPublisher
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.migrate import migrate
from graph_ingest.waiting import wait_until

NODES_PER_PLAN = 10


def make_plans(count: int, graph: GraphOptions) -> list[IngestionPlan]:
    plans = []
    for d in range(count):
        doc = f"doc-{d}"
        ids = [f"bench:{doc}:{i}" for i in range(NODES_PER_PLAN)]
        nodes = tuple(
            NodeUpsert(node_id=n, labels=("Thing",), properties={"name": n, "rank": i})
            for i, n in enumerate(ids)
        )
        edges = tuple(
            EdgeUpsert(
                src=ids[i], type="NEXT", dst=ids[(i + 1) % NODES_PER_PLAN], properties={"w": i}
            )
            for i in range(NODES_PER_PLAN)
        )
        op = f"op_bench_{uuid.uuid4().hex}"
        plans.append(
            IngestionPlan.freeze(
                kind=PlanKind.INGESTION,
                space="bench",
                document_id=doc,
                document_version="1",
                operation_id=op,
                expected_revision=0,
                graph=graph,
                mutation=Mutation(node_upserts=nodes, edge_upserts=edges),
                next_state=DocumentState(
                    space="bench",
                    document_id=doc,
                    revision=1,
                    operation_id=op,
                    content_hash=f"sha256:{d}",
                    document_version="1",
                    node_ids=tuple(ids),
                    edge_keys=tuple(e.key for e in edges),
                ),
                registrations=tuple(
                    EntityRegistration(
                        space="bench", entity_type="Thing", name=n, normalized_name=n, node_id=n
                    )
                    for n in ids
                ),
            )
        )
    return plans


def raw_neo4j_rate(settings: Settings, plans: list[IngestionPlan]) -> float:
    """Elements/s written directly with the driver in 1,000-row UNWIND batches, constraint on id."""
    label = f"B_raw_{uuid.uuid4().hex[:8]}"
    nodes = [
        {"id": n.node_id, "props": n.properties} for p in plans for n in p.mutation.node_upserts
    ]
    edges = [
        {"src": e.src, "dst": e.dst, "rank": e.rank, "props": e.properties}
        for p in plans
        for e in p.mutation.edge_upserts
    ]
    with GraphDatabase.driver(settings.neo4j.uri, auth=settings.neo4j.auth()) as driver:
        driver.execute_query(
            f"CREATE CONSTRAINT {label}_id IF NOT EXISTS FOR (n:`{label}`) REQUIRE n.node_id IS UNIQUE"
        )
        started = time.perf_counter()
        with driver.session() as session:
            for i in range(0, len(nodes), 1000):
                session.execute_write(
                    lambda tx, rows: tx.run(
                        f"UNWIND $rows AS row MERGE (n:`{label}` {{node_id: row.id}}) "
                        "SET n += row.props SET n:Thing",
                        rows=rows,
                    ).consume(),
                    nodes[i : i + 1000],
                )
            for i in range(0, len(edges), 1000):
                session.execute_write(
                    lambda tx, rows: tx.run(
                        f"UNWIND $rows AS row MATCH (a:`{label}` {{node_id: row.src}}) "
                        f"MATCH (b:`{label}` {{node_id: row.dst}}) "
                        "MERGE (a)-[r:NEXT {rank: row.rank}]->(b) SET r += row.props",
                        rows=rows,
                    ).consume(),
                    edges[i : i + 1000],
                )
        elapsed = time.perf_counter() - started
        _drop_label(driver, label)
    return (len(nodes) + len(edges)) / elapsed


def _drop_label(driver: Any, label: str) -> None:
    with driver.session() as session:  # CALL … IN TRANSACTIONS needs an auto-commit transaction
        session.run(
            f"MATCH (n:`{label}`) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"
        ).consume()
    for name in (f"{label}_id", f"{label}_node_id"):
        driver.execute_query(f"DROP CONSTRAINT `{name}` IF EXISTS")


@contextmanager
def isolated(base: Settings, batch: int, **applier: Any) -> Iterator[Settings]:
    """Topics, schema and group of one run; ``applier`` overrides applier settings."""
    tag = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topics": base.topics.model_copy(
                update={
                    "plans": f"bench.{tag}.plans",
                    "operations": f"bench.{tag}.operations",
                    "degradation": f"bench.{tag}.degradation",
                }
            ),
            "postgres": base.postgres.model_copy(update={"schema_name": f"bench_{tag}"}),
            "applier": base.applier.model_copy(
                update={"group_id": f"bench.{tag}", "batch_max_plans": batch, **applier}
            ),
        }
    )
    ensure_topics(settings)
    migrate(settings.postgres)
    try:
        yield settings
    finally:
        delete_topics(settings, pipeline_topics(settings.topics))
        with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {settings.postgres.schema_name} CASCADE")


def applier_rate(base: Settings, count: int, batch: int) -> tuple[float, float]:
    """(plans/s, elements/s) of one applier over ``count`` pre-published plans."""
    with isolated(base, batch) as settings:
        graph = GraphOptions(node_label=f"B_{settings.postgres.schema_name}")
        plans = make_plans(count, graph)
        publisher = PlanPublisher(settings)
        publisher.start()
        publisher.publish(plans)
        publisher.close()
        stop = threading.Event()
        # the applier alone, as before routing: its relay runs elsewhere in a deployment
        worker = threading.Thread(
            target=run_applier, args=(settings, stop), kwargs={"relay": False}
        )
        worker.start()
        try:
            with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:

                def all_completed() -> bool:
                    row = conn.execute(
                        "SELECT count(*) FROM operations WHERE stage = 'COMPLETED'"
                    ).fetchone()
                    return row is not None and row[0] == count

                wait_until(all_completed, timeout_s=1800, interval_s=0.5, what="all plans")
                row = conn.execute(
                    "SELECT EXTRACT(EPOCH FROM max((stage_times->>'COMPLETED')::timestamptz)"
                    " - min(created_at)) FROM operations"
                ).fetchone()
                assert row is not None
                elapsed = float(row[0])
        finally:
            stop.set()
            worker.join()
        with GraphDatabase.driver(settings.neo4j.uri, auth=settings.neo4j.auth()) as driver:
            _drop_label(driver, graph.node_label)
    elements = sum(p.mutation.element_count for p in plans)
    return count / elapsed, elements / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=Settings().applier.batch_max_plans)
    args = parser.parse_args()
    settings = Settings()
    LocalStack(settings).up()
    plans = make_plans(args.plans, GraphOptions())
    raw_neo4j_rate(settings, plans)  # warm-up: Neo4j is ≈4x slower cold
    raw = raw_neo4j_rate(settings, plans)
    one_plans, one_elements = applier_rate(settings, args.plans, 1)
    many_plans, many_elements = applier_rate(settings, args.plans, args.batch)
    elements_per_plan = NODES_PER_PLAN * 2
    print(f"{args.plans} plans x {elements_per_plan} elements (nodes + edges)")
    print(
        f"raw Neo4j UNWIND MERGE, 1000-row batches : {raw:10.0f} elements/s  ({raw / elements_per_plan:7.0f} plans/s)"
    )
    print(
        f"applier, batch size 1                   : {one_elements:10.0f} elements/s  ({one_plans:7.1f} plans/s)  {one_elements / raw:6.1%} of raw"
    )
    print(
        f"applier, batch size {args.batch:<4}                : {many_elements:10.0f} elements/s  ({many_plans:7.1f} plans/s)  {many_elements / raw:6.1%} of raw"
    )
    print(f"batch {args.batch} vs batch 1: {many_plans / one_plans:.1f}x")


if __name__ == "__main__":
    main()
