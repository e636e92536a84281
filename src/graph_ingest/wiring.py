"""Builds the workers from settings: an applier (the store, the graph writer, the Kafka loops and
the outbox relay beside it) and a planner (the store, the planner, the transactional loop), and
the default planner factory (``build_planner``, ``PLANNER__FACTORY``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from graph_ingest.consumers.applier.apply import PlanApplier
from graph_ingest.consumers.applier.route_log import tier_label
from graph_ingest.consumers.applier.routing import Ladder
from graph_ingest.consumers.applier.worker import ApplierWorker
from graph_ingest.consumers.planner.worker import PlannerWorker
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.graph.base import GraphWriter
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.hooks import Hooks, LoopSubscriber, relay_loop
from graph_ingest.kafka.control import ControlFollower
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.observability.metrics import Kind, PipelineMetrics
from graph_ingest.planning.extractor import Extractor
from graph_ingest.planning.graph_schema import GraphSchema, load_graph_schema
from graph_ingest.planning.llm import LlmExtractor
from graph_ingest.planning.metrics import PlanningMetrics
from graph_ingest.planning.planner import Planner, Resource
from graph_ingest.planning.request_planner import RequestPlanner
from graph_ingest.planning.rules import RulesExtractor
from graph_ingest.producers.relay import OutboxRelay
from graph_ingest.projections.projector import Projector
from graph_ingest.projections.tables import ReadTables
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import thread_beside

BUNDLED_GRAPH_SCHEMA = Path(__file__).resolve().parent / "demo" / "graph_schema.yaml"
"""The graph schema of the demo corpus (and of the planner's tests), with its extraction rules."""

log = logging.getLogger(__name__)


def postgres_store(settings: Settings) -> PostgresOperationStore:
    return PostgresOperationStore(
        settings.postgres,
        event_encoder=encode_operation,
        operations_topic=settings.topics.operations,
    )


@contextmanager
def started(store: OperationStore, graph: GraphWriter) -> Iterator[None]:
    store.start()
    try:
        graph.start()
        try:
            yield
        finally:
            graph.close()
    finally:
        store.close()


def run_applier(
    settings: Settings,
    stop: threading.Event,
    *,
    store: OperationStore | None = None,
    graph: GraphWriter | None = None,
    relay: bool = True,
    subscribers: Sequence[LoopSubscriber] = (),
    relay_subscribers: Sequence[LoopSubscriber] = (),
) -> None:
    """Run one applier until ``stop`` is set. Store and writer may be injected (tests wrap them);
    ``subscribers`` watch every loop's lifecycle hooks (``hooks``), and
    ``relay_subscribers`` the relay's (the metrics, not the health: the relay holds no
    partition, and its rounds are no sign the consuming loops turn).

    ``relay``: also run an outbox relay in this process, so that one process is a complete
    pipeline (retry copies, DLQ envelopes and the operation log all leave through the outbox).
    Relays of one schema elect one active among them; the others stand by. Every loop obeys the
    operators' forced breakers, followed from the control topic (read whole before they start)."""
    store = store or postgres_store(settings)
    graph = graph or Neo4jGraphWriter(settings.neo4j)
    with (
        started(store, graph),
        _relay_beside(settings, stop, enabled=relay, subscribers=relay_subscribers),
        DegradationPublisher(settings) as degradation,
        ControlFollower(settings) as control,
    ):
        applier = build_applier(settings, store, graph)
        applying = threading.Lock()  # one applier, one store and one writer for both loops
        loops = [
            ApplierWorker(
                loop_settings,
                applier,
                topics=topics,
                applying=applying,
                report_degradation=degradation.publish,
                hooks=Hooks(loop_settings.applier.worker_id, *subscribers),
                controls=control.controls,
            )
            for loop_settings, topics in _loops(settings)
        ]
        _run_together(loops, stop)


def _loops(settings: Settings) -> list[tuple[Settings, list[str]]]:
    """The main topic's loop and the retry tiers' loop, each in a consumer group of its own.

    The cooperative-sticky assignor balances the number of partitions a member owns, not where
    they come from: in one group, a second applier may get every tier partition and none of the
    plans topic. Two groups spread each topic over the appliers."""
    ladder = Ladder.of(settings)
    loops = [(settings, [ladder.plans_topic])]
    if ladder.tiers:
        applier = settings.applier
        retry = applier.model_copy(
            update={
                "group_id": f"{applier.group_id}.retry",
                "worker_id": f"{applier.worker_id}/retry",
            }
        )
        # The tiers' loop idles while the plans loop holds a batch: it must not collect then
        no_idle_gc = settings.gc.model_copy(update={"idle_collect_min": 0})
        loops.append(
            (settings.model_copy(update={"applier": retry, "gc": no_idle_gc}), ladder.tier_topics)
        )
    return loops


def _run_together(loops: list[ApplierWorker], stop: threading.Event) -> None:
    """Run the first loop here and the others in threads; when one ends, all end. The first error
    is raised once every loop has stopped."""
    errors: list[BaseException] = []

    def run(loop: ApplierWorker) -> None:
        try:
            loop.run(stop)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    threads = [threading.Thread(target=run, args=(loop,), name="retry-tiers") for loop in loops[1:]]
    for thread in threads:
        thread.start()
    try:
        run(loops[0])
    finally:
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]


@contextmanager
def _relay_beside(
    settings: Settings,
    stop: threading.Event,
    *,
    enabled: bool,
    subscribers: Sequence[LoopSubscriber] = (),
) -> Iterator[None]:
    """An outbox relay thread while the block runs; it stops when the block ends, however."""
    if not enabled:
        yield
        return
    relay = OutboxRelay(settings, hooks=relay_hooks(settings, subscribers))
    relay.start()

    def run(relay_stop: threading.Event) -> None:
        try:
            relay.run(relay_stop)
        except Exception:
            log.exception("the outbox relay beside the applier stopped; stopping the applier")
            stop.set()

    try:
        with thread_beside(
            run, name="outbox-relay", join_timeout_s=settings.relay.flush_timeout_s + 30
        ):
            yield
    finally:
        relay.close()


def relay_hooks(settings: Settings, subscribers: Sequence[LoopSubscriber]) -> Hooks:
    """The hooks of an outbox relay (its loop named ``relay/<schema>``)."""
    return Hooks(relay_loop(settings.postgres.schema_name), *subscribers)


def build_applier(settings: Settings, store: OperationStore, graph: GraphWriter) -> PlanApplier:
    return PlanApplier(
        store, graph, ladder=Ladder.of(settings), worker_id=settings.applier.worker_id
    )


def run_planner(
    settings: Settings,
    stop: threading.Event,
    planner: RequestPlanner,
    *,
    store: OperationStore | None = None,
    subscribers: Sequence[LoopSubscriber] = (),
) -> None:
    """Run one planner worker until ``stop`` is set; the planner is started first and closed
    when the worker stops. ``subscribers`` watch its lifecycle hooks (``hooks``)."""
    store = store or postgres_store(settings)
    store.start()
    try:
        planner.start()
        try:
            hooks = Hooks(settings.planner.worker_id, *subscribers)
            PlannerWorker(settings, planner, store, hooks=hooks).run(stop)
        finally:
            planner.close()
    finally:
        store.close()


def run_projector(
    settings: Settings, stop: threading.Event, *, subscribers: Sequence[LoopSubscriber] = ()
) -> None:
    """Run one projector until ``stop`` is set: the operations topic folded into the read
    tables (``<POSTGRES__SCHEMA_NAME>_read``, made by ``db migrate``, as the store's tables
    are). ``subscribers`` watch its lifecycle hooks."""
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        hooks = Hooks(settings.projector.worker_id, *subscribers)
        Projector(settings, tables, hooks=hooks).run(stop)
    finally:
        tables.close()


def build_planner(settings: Settings, *, metrics: PlanningMetrics | None = None) -> Planner:
    """The default planner factory: the graph schema of ``PLANNER__GRAPH_SCHEMA``, the one
    extractor ``PLANNER__EXTRACTOR`` names (``rules``, or ``llm`` configured by
    ``GRAPH_INGEST_LLM__*``), a PostgreSQL store of its own as its view, plans written into
    ``PLANNER__GRAPH``. Touches no network: ``start`` opens the store. Extraction issues are
    counted on ``metrics`` (the process's ``PipelineMetrics.planning``; None: not counted)."""
    path = settings.planner.graph_schema
    if path is None:
        raise ConfigurationError(
            "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA is not set: name the graph schema file to plan "
            f"with (the demo's is bundled: {BUNDLED_GRAPH_SCHEMA})"
        )
    schema = load_graph_schema(path)
    extractor, owned = _extractor(settings, schema)
    store = postgres_store(settings)
    return Planner(
        schema,
        {extractor.name: extractor},
        store,
        settings.planner,
        graph=settings.planner.graph,
        on_issues=metrics.record_issues if metrics is not None else None,
        resources=(store, *owned),
    )


def pipeline_metrics(
    settings: Settings, kind: Kind, registry: CollectorRegistry, *, relay: bool = False
) -> PipelineMetrics:
    """The metrics of a process of ``kind`` on ``registry`` (``observability.metrics``): its
    worker id, group and group protocol on the info metric, its topics' and tiers' label values
    created at 0; ``relay``: an outbox relay runs in the process too."""
    ladder = Ladder.of(settings)
    worker_id, group, topics = {
        "applier": (settings.applier.worker_id, settings.applier.group_id, ladder.topics),
        "planner": (
            settings.planner.worker_id,
            settings.planner.group_id,
            [settings.topics.requests],
        ),
        "projector": (
            settings.projector.worker_id,
            settings.projector.group_id,
            [settings.topics.operations],
        ),
    }.get(kind, (relay_loop(settings.postgres.schema_name) if kind == "relay" else kind, "", []))
    protocol = (
        settings.kafka.consumer_config(group).get("group.protocol", "classic") if group else ""
    )
    return PipelineMetrics(
        registry,
        kind,
        worker_id=worker_id,
        group=group,
        protocol=str(protocol),
        topics=topics,
        tiers=[tier_label(delay_s) for _, delay_s in ladder.tiers] if kind == "applier" else (),
        relay=relay or kind == "relay",
    )


def scrape_collectors(settings: Settings, kind: Kind) -> list[Collector]:
    """The collectors a process of ``kind`` serves beside its ``PipelineMetrics``, read at scrape
    time (``observability.exposition.serving_metrics`` registers and closes them): the lag of
    the consumer groups it consumes in (the API: of every group, so lag shows while a group has
    no worker left), and the store's gauges (DLQ, outbox, parked) where a store is at hand
    (applier, API). Building them connects to nothing; a scrape reads, cached and bounded."""
    from graph_ingest.observability.lag import consumer_groups, consumer_lag
    from graph_ingest.observability.store_gauges import store_gauges

    collectors: list[Collector] = []
    if consumer_groups(settings, kind):
        collectors.append(consumer_lag(settings, kind))
    if kind in ("applier", "api"):
        collectors.append(store_gauges(settings))
    return collectors


def _extractor(settings: Settings, schema: GraphSchema) -> tuple[Extractor, tuple[Resource, ...]]:
    """The configured extractor and what of it the planner must release."""
    name = settings.planner.extractor
    if name == RulesExtractor.name:
        return RulesExtractor(schema), ()
    if name == LlmExtractor.name:
        llm = LlmExtractor(settings.llm)
        return llm, (llm,)
    raise ConfigurationError(
        f"GRAPH_INGEST_PLANNER__EXTRACTOR is {name!r}: the built-in planner knows "
        f"{RulesExtractor.name!r} and {LlmExtractor.name!r}"
    )
