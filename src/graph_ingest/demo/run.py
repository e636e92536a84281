"""The demo: real Kafka, Neo4j and PostgreSQL on this machine, real documents, end to end.

A planner worker (the ``rules`` extractor over the bundled graph schema) and an applier with its
outbox relay run in this process, as `graph-ingest worker planner` and `worker applier` run
them. The rounds of ``demo.corpus`` go in through ``IngestProducer``, each followed to its
final stage before the next; then every operation and the graph those documents span are
printed. Each run plans into a space of its own (``demo_<UTC time>``), so it can run again on
the same stack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from graph_ingest.demo.corpus import (
    DOCUMENTS,
    DROPPED_RELATION,
    RETRACTED_ONLY,
    STILL_SHARED,
    Expected,
    arrow,
    demo_rounds,
)
from graph_ingest.domain.plan import PlanKind
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.kafka.admin import ensure_topics
from graph_ingest.planning.graph_schema import load_graph_schema
from graph_ingest.producers.follow import Followed, follow
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.migrate import migrate
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.wiring import (
    BUNDLED_GRAPH_SCHEMA,
    build_planner,
    postgres_store,
    run_applier,
    run_planner,
)

Echo = Callable[[str], None]
ROUND_TIMEOUT_S = 180.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """Where one submission ended: its operation's final stage and its plan's kind."""

    expected: Expected
    followed: Followed
    kind: PlanKind | None

    @property
    def ok(self) -> bool:
        return self.followed.completed and self.kind is self.expected.kind


@dataclass(frozen=True, slots=True)
class DemoResult:
    space: str
    outcomes: list[Outcome]
    nodes: list[tuple[str, str]]
    """(type, name) of every node the demo's documents ever listed that the graph holds."""
    relations: list[tuple[str, str, str]]
    """(source name, type, target name) between those nodes."""

    def checks(self) -> list[tuple[str, bool]]:
        """What the graph must show after the rounds, each with whether it does."""
        names = {name for _, name in self.nodes}
        return [
            (
                f"the update removed {arrow(DROPPED_RELATION)}",
                DROPPED_RELATION not in self.relations,
            ),
            *((f"the retraction removed {n}", n not in names) for n in RETRACTED_ONLY),
            *((f"{n} stays: another document names it", n in names) for n in STILL_SHARED),
        ]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes) and all(ok for _, ok in self.checks())


def run_demo(settings: Settings, echo: Echo) -> bool:
    """The whole demo on the local stack; True when everything ended where it should."""
    echo("1/4 starting the local stack (Kafka, Neo4j, PostgreSQL)…")
    LocalStack(settings).up()
    echo("2/4 creating topics and migrating PostgreSQL…")
    ensure_topics(settings)
    migrate(settings.postgres)
    result = demo_flow(settings, echo, space=f"demo_{datetime.now(UTC):%Y%m%d_%H%M%S}")
    echo("4/4 results")
    report(result, echo)
    return result.ok


def demo_settings(settings: Settings) -> Settings:
    """``settings`` planning with the bundled schema and the rules extractor, whatever is set."""
    planner = settings.planner.model_copy(
        update={"graph_schema": BUNDLED_GRAPH_SCHEMA, "extractor": "rules"}
    )
    return settings.model_copy(update={"planner": planner})


def demo_flow(settings: Settings, echo: Echo, *, space: str) -> DemoResult:
    """Run the workers, submit every round into ``space`` and follow it; read the graph.
    Topics and the PostgreSQL schema must exist."""
    settings = demo_settings(settings)
    schema_version = load_graph_schema(BUNDLED_GRAPH_SCHEMA).version
    store = postgres_store(settings)
    store.start()
    try:
        outcomes: list[Outcome] = []
        with _workers(settings), IngestProducer(settings) as producer:
            for number, round_ in enumerate(demo_rounds(space, schema_version), 1):
                echo(f"3/4 round {number}: {round_.title}…")
                submitted = producer.submit_many([e.request for e in round_.submissions])
                followed = follow(
                    store, [s.submission_id for s in submitted], timeout_s=ROUND_TIMEOUT_S
                )
                outcomes += [
                    Outcome(e, f, _kind(store, f))
                    for e, f in zip(round_.submissions, followed, strict=True)
                ]
        nodes, relations = _graph(settings, store, space)
    finally:
        store.close()
    return DemoResult(space, outcomes, nodes, relations)


def report(result: DemoResult, echo: Echo) -> None:
    echo(f"  operations (space {result.space}):")
    for o in result.outcomes:
        request = o.expected.request
        stage = o.followed.operation.stage.value if o.followed.operation else o.followed.where
        kind = o.kind.value if o.kind else "-"
        echo(
            f"  {'ok ' if o.ok else 'BAD'} {o.followed.submission_id}  {request.document_id:<15}"
            f" v={request.document_version:<9} {kind:<10} {stage}"
            + ("" if o.ok else f" (expected {o.expected.kind.value} COMPLETED)")
        )
    echo(f"  graph: {len(result.nodes)} nodes, {len(result.relations)} relations")
    by_type: dict[str, list[str]] = {}
    for node_type, name in result.nodes:
        by_type.setdefault(node_type, []).append(name)
    for node_type, names in sorted(by_type.items()):
        echo(f"    {node_type:<8} {', '.join(names)}")
    for relation in result.relations:
        echo(f"    {arrow(relation)}")
    for what, ok in result.checks():
        echo(f"  {'ok ' if ok else 'BAD'} {what}")


def _kind(store: PostgresOperationStore, followed: Followed) -> PlanKind | None:
    if followed.operation is None:
        return None
    plan_bytes = store.get_plan_bytes(followed.operation.operation_id)
    return decode_plan(plan_bytes).kind if plan_bytes is not None else None


def _graph(
    settings: Settings, store: PostgresOperationStore, space: str
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """The nodes every revision of the demo's documents listed, as the graph holds them now."""
    node_ids = {
        node
        for document in DOCUMENTS
        for state in store.document_history(space, document)
        for node in state.node_ids
    }
    with Neo4jGraphWriter(settings.neo4j) as graph:
        return graph.named_elements(settings.planner.graph, sorted(node_ids))


@contextmanager
def _workers(settings: Settings) -> Iterator[None]:
    """A planner and an applier (with an outbox relay beside it), each in a thread."""
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=run_planner, args=(settings, stop, build_planner(settings)), name="planner"
        ),
        threading.Thread(target=run_applier, args=(settings, stop), name="applier"),
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


__all__ = ["DemoResult", "Outcome", "demo_flow", "demo_settings", "report", "run_demo"]
