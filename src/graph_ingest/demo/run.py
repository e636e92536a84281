"""The demo: real Kafka, Neo4j and PostgreSQL on this machine, a handful of plans, end to end.

Publishes two versions of one document, a second document sharing an entity with the first,
and a stale plan that must end in CONFLICT; prints each operation's final stage and the graph.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from graph_ingest.consumers.wiring import postgres_store, run_applier
from graph_ingest.demo.samples import Entity, Relation, sample_plan
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.kafka.admin import ensure_topics
from graph_ingest.producers.plan_publisher import PlanPublisher
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.base import OperationStore
from graph_ingest.store.migrate import migrate
from graph_ingest.waiting import wait_until

SPACE = "demo"
ALICE = Entity("Person", "Alice Martin", aliases=("A. Martin",))
BOB = Entity("Person", "Bob Stone")
ACME = Entity("Company", "Acme Corp", aliases=("ACME",))
GLOBEX = Entity("Company", "Globex")
BERLIN = Entity("City", "Berlin")

Echo = Callable[[str], None]


def run_demo(settings: Settings, echo: Echo) -> bool:
    """Run the whole demo; True when every operation ended where it should."""
    echo("1/5 starting the local stack (Kafka, Neo4j, PostgreSQL)…")
    LocalStack(settings).up()
    echo("2/5 creating topics and migrating PostgreSQL…")
    ensure_topics(settings)
    migrate(settings.postgres)
    store = postgres_store(settings)
    store.start()
    try:
        with _workers(settings):
            return _publish_and_watch(settings, store, echo)
    finally:
        store.close()


def _publish_and_watch(settings: Settings, store: OperationStore, echo: Echo) -> bool:
    doc1_v1 = sample_plan(
        SPACE,
        "doc-1",
        "Alice Martin works at Acme Corp, which is based in Berlin.",
        [ALICE, ACME, BERLIN],
        [Relation(ALICE, "WORKS_AT", ACME), Relation(ACME, "LOCATED_IN", BERLIN)],
    )
    doc1_v2 = sample_plan(
        SPACE,
        "doc-1",
        "Alice Martin left Acme Corp and now works at Globex in Berlin.",
        [ALICE, ACME, GLOBEX, BERLIN],
        [Relation(ALICE, "WORKS_AT", GLOBEX), Relation(GLOBEX, "LOCATED_IN", BERLIN)],
        previous=doc1_v1.next_state,
    )
    doc2 = sample_plan(
        SPACE,
        "doc-2",
        "Bob Stone is an engineer at Acme Corp.",
        [BOB, ACME],
        [Relation(BOB, "WORKS_AT", ACME)],
    )
    stale = sample_plan(
        SPACE,
        "doc-1",
        "Alice Martin works at Acme Corp in Berlin (an edit made on an old copy).",
        [ALICE, ACME, BERLIN],
        [Relation(ALICE, "WORKS_AT", ACME)],
        previous=doc1_v1.next_state,
    )
    expected = [
        ("doc-1 v1", doc1_v1, Stage.COMPLETED),
        ("doc-1 v2", doc1_v2, Stage.COMPLETED),
        ("doc-2 v1", doc2, Stage.COMPLETED),
    ]
    publisher = PlanPublisher(settings)
    publisher.start()
    try:
        echo("3/5 publishing doc-1 v1, doc-1 v2 and doc-2…")
        publisher.publish([plan for _, plan, _ in expected])
        _wait_for(store, expected)
        echo("4/5 publishing a stale edit of doc-1 (built on revision 1, document is at 2)…")
        publisher.publish([stale])
        expected.append(("doc-1 stale edit", stale, Stage.CONFLICT))
        _wait_for(store, expected[-1:])
    finally:
        publisher.close()
    echo("5/5 results")
    ok = True
    for name, plan, stage in expected:
        operation = store.get_operation(plan.operation_id)
        actual = operation.stage if operation else None
        ok &= actual is stage
        mark = "ok " if actual is stage else "BAD"
        echo(f"  {mark} {name:<17} {plan.operation_id}  {actual} (expected {stage})")
    state = store.get_document_state(SPACE, "doc-1")
    echo(f"  doc-1 is at revision {state.revision if state else None}")
    writer = Neo4jGraphWriter(settings.neo4j)
    writer.start()
    try:
        nodes, edges = writer.count_elements(doc1_v1.graph)
    finally:
        writer.close()
    echo(f"  graph: {nodes} nodes, {edges} relationships under label {doc1_v1.graph.node_label}")
    return ok


def _wait_for(store: OperationStore, expected: list[tuple[str, IngestionPlan, Stage]]) -> None:
    def reached() -> bool:
        for _, plan, stage in expected:
            operation = store.get_operation(plan.operation_id)
            if operation is None or operation.stage is not stage:
                return False
        return True

    wait_until(reached, timeout_s=120, interval_s=0.2, what="the demo operations")


@contextmanager
def _workers(settings: Settings) -> Iterator[None]:
    """One applier, as `graph-ingest worker applier` runs it: with an outbox relay beside it."""
    stop = threading.Event()
    applier = threading.Thread(target=run_applier, args=(settings, stop), name="applier")
    applier.start()
    try:
        yield
    finally:
        stop.set()
        applier.join(timeout=60)
