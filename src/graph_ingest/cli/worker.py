"""`graph-ingest worker …`: long-running consumer-group processes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import reports_errors
from graph_ingest.cli.gc_policy import tune_collector
from graph_ingest.cli.signals import stop_on_signals
from graph_ingest.hooks import LoopSubscriber, relay_loop
from graph_ingest.observability.logs import bind_worker, worker_verbosity
from graph_ingest.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from graph_ingest.observability.metrics import Kind, PipelineMetrics
    from graph_ingest.observability.server import ReadyDetails

log = logging.getLogger("graph_ingest.worker")


def _port_option(name: str, serves: str, section: str) -> Callable[[F], F]:
    """``--<name>-port PORT``: serve ``serves`` there, over GRAPH_INGEST_<section>__PORT."""
    return click.option(
        f"--{name}-port",
        type=click.IntRange(0, 65535),
        metavar="PORT",
        help=f"Serve {serves} on this port (default: GRAPH_INGEST_{section}__PORT; unset: "
        f"none), on GRAPH_INGEST_{section}__HOST (127.0.0.1).",
    )


health_port_option = _port_option(
    "health", "/health/live, /health/ready and /health/startup", "HEALTH"
)
metrics_port_option = _port_option("metrics", "/metrics (Prometheus text format)", "METRICS")


@contextmanager
def _observed(
    settings: Settings,
    kind: Kind,
    *,
    health_port: int | None,
    metrics_port: int | None,
    worker_id: str,
    details: ReadyDetails | None = None,
    relay: bool = False,
    collectors: Sequence[Collector] = (),
    health: bool = True,
) -> Iterator[tuple[tuple[LoopSubscriber, ...], PipelineMetrics]]:
    """The health endpoints and ``/metrics`` while the worker runs (each port option over its
    setting); yields the subscribers for the worker's loops and the process's metrics. The
    metrics are kept (and fed) even when not served: subscribing costs little, and a scrape
    port can then be the only thing that differs between two runs. No ``_created`` series
    (``observability.exposition.without_created_series``)."""
    from prometheus_client import CollectorRegistry

    from graph_ingest.observability.exposition import serving_metrics, without_created_series
    from graph_ingest.wiring import pipeline_metrics, scrape_collectors

    without_created_series()

    metrics_settings = settings.metrics
    if metrics_port is not None:
        metrics_settings = metrics_settings.model_copy(update={"port": metrics_port})
    registry = CollectorRegistry()
    metrics = pipeline_metrics(settings, kind, registry, relay=relay)
    with ExitStack() as stack:
        watching = (
            stack.enter_context(_health(settings, health_port, worker_id, details))
            if health
            else ()
        )
        stack.enter_context(
            serving_metrics(
                metrics_settings, registry, [*scrape_collectors(settings, kind), *collectors]
            )
        )
        yield (*watching, metrics), metrics


def _health(
    settings: Settings, port: int | None, worker_id: str, details: ReadyDetails | None = None
) -> AbstractContextManager[tuple[LoopSubscriber, ...]]:
    """The health endpoints while the worker runs (``--health-port`` over the setting)."""
    from graph_ingest.observability.server import serving_health

    health = settings.health
    if port is not None:
        health = health.model_copy(update={"port": port})
    return serving_health(health, worker_id, details)


@contextmanager
def _running(settings: Settings, kind: str, worker_id: str, group: str) -> Iterator[None]:
    """Sets the garbage collector's thresholds (``gc_policy``); says that the worker started and
    that it stopped (at INFO, shown by default); every log record in between carries its worker
    id."""
    young, _, _ = tune_collector(settings.gc)
    bind_worker(kind=kind, worker_id=worker_id)
    log.info(
        "%s worker %s started (group %s, gc young threshold %d)", kind, worker_id, group, young
    )
    try:
        yield
    except Exception as exc:  # shown as a command error too; here also as a (JSON) record
        log.error("%s worker %s stopped: %s: %s", kind, worker_id, type(exc).__name__, exc)
        raise
    except BaseException as exc:
        log.info("%s worker %s stopped: %s", kind, worker_id, type(exc).__name__)
        raise
    log.info("%s worker %s stopped", kind, worker_id)


@click.group()
def worker() -> None:
    """Run a pipeline worker until SIGTERM/SIGINT (it finishes the batch in hand, then exits).

    A worker logs at INFO by default (it started, its partitions, it stopped); -v shows
    every library's INFO lines too, --log-format json one JSON object per line.
    """
    worker_verbosity()


@worker.command("applier")
@click.option(
    "--relay/--no-relay",
    default=True,
    show_default=True,
    help="Also run an outbox relay in this process (one active per schema, the others stand "
    "by). --no-relay when relays run as their own processes.",
)
@health_port_option
@metrics_port_option
@reports_errors
def applier(relay: bool, health_port: int | None, metrics_port: int | None) -> None:
    """Apply frozen plans from the plans topic and its retry tiers to Neo4j and PostgreSQL.

    One process is a complete pipeline: it consumes the plans topic and every retry tier
    (ingestion.plans.retry.1s, .5s, .30s; in the group <group>.retry), routes failures to the
    next tier or the DLQ, and publishes the outbox. Run several (same
    GRAPH_INGEST_APPLIER__GROUP_ID) to share the partitions.

    \b
    Example:
      GRAPH_INGEST_APPLIER__BATCH_MAX_PLANS=200 graph-ingest worker applier --health-port 8081 \\
        --metrics-port 9464
    """
    from graph_ingest.wiring import run_applier

    settings = load_settings()
    stop = stop_on_signals()
    applier = settings.applier
    with (
        _running(settings, "applier", applier.worker_id, applier.group_id),
        _observed(
            settings,
            "applier",
            health_port=health_port,
            metrics_port=metrics_port,
            worker_id=applier.worker_id,
            relay=relay,
        ) as (subscribers, metrics),
    ):
        run_applier(
            settings, stop, relay=relay, subscribers=subscribers, relay_subscribers=[metrics]
        )


@worker.command("planner")
@click.option(
    "--planner",
    "factory",
    metavar="MODULE:FUNCTION",
    help="The function that builds the planner from the settings (default: "
    "GRAPH_INGEST_PLANNER__FACTORY, graph_ingest.wiring:build_planner).",
)
@health_port_option
@metrics_port_option
@reports_errors
def planner(factory: str | None, health_port: int | None, metrics_port: int | None) -> None:
    """Plan ingest requests (topic ingest.requests) into frozen plans (ingestion.plans).

    Each batch's plans, planning DLQ entries and request offsets are committed in one Kafka
    transaction (transactional.id <PLANNER__TRANSACTIONAL_ID_PREFIX>.<PLANNER__WORKER_ID>): a
    crash never publishes two plans for one request. Transient planning failures are retried
    with backoff for PLANNER__RETRY_BUDGET_S, holding only that request's partition; permanent
    ones become planning DLQ entries (graph-ingest dlq list). Run several (same
    GRAPH_INGEST_PLANNER__GROUP_ID, each its own stable PLANNER__WORKER_ID) to share the
    partitions.

    The default planner needs the graph schema file it plans with
    (GRAPH_INGEST_PLANNER__GRAPH_SCHEMA, YAML or JSON) and the extractor
    (GRAPH_INGEST_PLANNER__EXTRACTOR: rules, the default, or llm with GRAPH_INGEST_LLM__*).

    \b
    Example:
      export GRAPH_INGEST_PLANNER__GRAPH_SCHEMA=src/graph_ingest/demo/graph_schema.yaml
      GRAPH_INGEST_PLANNER__WORKER_ID=planner-0 graph-ingest worker planner
    """
    from graph_ingest.planning.request_planner import build_counting, load_planner_factory
    from graph_ingest.wiring import run_planner

    settings = load_settings()
    build = load_planner_factory(factory or settings.planner.factory)
    stop = stop_on_signals()
    planner_settings = settings.planner
    with (
        _running(settings, "planner", planner_settings.worker_id, planner_settings.group_id),
        _observed(
            settings,
            "planner",
            health_port=health_port,
            metrics_port=metrics_port,
            worker_id=planner_settings.worker_id,
        ) as (subscribers, metrics),
    ):
        planner = build_counting(build, settings, metrics.planning)
        run_planner(settings, stop, planner, subscribers=subscribers)


@worker.command("projector")
@health_port_option
@metrics_port_option
@reports_errors
def projector(health_port: int | None, metrics_port: int | None) -> None:
    """Fold the operations topic into the read tables (schema <POSTGRES__SCHEMA_NAME>_read).

    Reads ingestion.operations in its own consumer group (GRAPH_INGEST_PROJECTOR__GROUP_ID)
    from where the read tables say it stopped (from the beginning for new tables). Each batch
    and its positions are one transaction; duplicated or reordered events never move a status
    backwards. Run several (same group) to share the partitions. Run `graph-ingest db migrate`
    first.

    \b
    Example:
      GRAPH_INGEST_PROJECTOR__GROUP_ID=graph-ingest-projector graph-ingest worker projector \\
        --health-port 8083
    """
    from graph_ingest.observability.metrics import ProjectionMetrics
    from graph_ingest.projections.lag_reader import LagForReadiness
    from graph_ingest.wiring import run_projector

    settings = load_settings()
    projector = settings.projector
    lag = LagForReadiness(settings)
    try:
        with (
            _running(settings, "projector", projector.worker_id, projector.group_id),
            _observed(
                settings,
                "projector",
                health_port=health_port,
                metrics_port=metrics_port,
                worker_id=projector.worker_id,
                details=lag,
                collectors=[ProjectionMetrics(lag)],
            ) as (subscribers, _),
        ):
            run_projector(settings, stop_on_signals(), subscribers=subscribers)
    finally:
        lag.close()


@worker.command("relay")
@metrics_port_option
@reports_errors
def relay(metrics_port: int | None) -> None:
    """Publish the PostgreSQL outbox, in order, to Kafka (operation log, released plans).

    One relay per schema is active at a time; a second one waits as a hot standby.

    \b
    Example:
      graph-ingest -v worker relay
    """
    from graph_ingest.producers.relay import OutboxRelay
    from graph_ingest.wiring import relay_hooks

    settings = load_settings()
    schema = settings.postgres.schema_name
    with (
        _running(settings, "relay", relay_loop(schema), f"outbox {schema} (one active)"),
        _observed(
            settings,
            "relay",
            health_port=None,
            metrics_port=metrics_port,
            worker_id=relay_loop(schema),
            health=False,
        ) as (subscribers, _),
    ):
        relay = OutboxRelay(settings, hooks=relay_hooks(settings, subscribers))
        relay.start()
        try:
            relay.run(stop_on_signals())
        finally:
            relay.close()
