"""`graph-ingest worker …`: long-running consumer-group processes."""

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import reports_errors
from graph_ingest.cli.signals import stop_on_signals


@click.group()
def worker() -> None:
    """Run a pipeline worker until SIGTERM/SIGINT (it finishes the batch in hand, then exits)."""


@worker.command("applier")
@click.option(
    "--relay/--no-relay",
    default=True,
    show_default=True,
    help="Also run an outbox relay in this process (one active per schema, the others stand "
    "by). --no-relay when relays run as their own processes.",
)
@reports_errors
def applier(relay: bool) -> None:
    """Apply frozen plans from the plans topic and its retry tiers to Neo4j and PostgreSQL.

    One process is a complete pipeline: it consumes the plans topic and every retry tier
    (ingestion.plans.retry.1s, .5s, .30s; in the group <group>.retry), routes failures to the
    next tier or the DLQ, and publishes the outbox. Run several (same
    GRAPH_INGEST_APPLIER__GROUP_ID) to share the partitions.

    \b
    Example:
      GRAPH_INGEST_APPLIER__BATCH_MAX_PLANS=200 graph-ingest worker applier
    """
    from graph_ingest.wiring import run_applier

    run_applier(load_settings(), stop_on_signals(), relay=relay)


@worker.command("planner")
@click.option(
    "--planner",
    "factory",
    metavar="MODULE:FUNCTION",
    help="The function that builds the planner from the settings (default: "
    "GRAPH_INGEST_PLANNER__FACTORY, graph_ingest.wiring:build_planner).",
)
@reports_errors
def planner(factory: str | None) -> None:
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
    from graph_ingest.planning.request_planner import load_planner_factory
    from graph_ingest.wiring import run_planner

    settings = load_settings()
    build = load_planner_factory(factory or settings.planner.factory)
    run_planner(settings, stop_on_signals(), build(settings))


@worker.command("projector")
@reports_errors
def projector() -> None:
    """Fold the operations topic into the read tables (schema <POSTGRES__SCHEMA_NAME>_read).

    Reads ingestion.operations in its own consumer group (GRAPH_INGEST_PROJECTOR__GROUP_ID)
    from where the read tables say it stopped (from the beginning for new tables). Each batch
    and its positions are one transaction; duplicated or reordered events never move a status
    backwards. Run several (same group) to share the partitions. Run `graph-ingest db migrate`
    first.

    \b
    Example:
      GRAPH_INGEST_PROJECTOR__GROUP_ID=graph-ingest-projector graph-ingest worker projector
    """
    from graph_ingest.wiring import run_projector

    run_projector(load_settings(), stop_on_signals())


@worker.command("relay")
@reports_errors
def relay() -> None:
    """Publish the PostgreSQL outbox, in order, to Kafka (operation log, released plans).

    One relay per schema is active at a time; a second one waits as a hot standby.

    \b
    Example:
      graph-ingest -v worker relay
    """
    from graph_ingest.producers.relay import OutboxRelay

    settings = load_settings()
    relay = OutboxRelay(settings)
    relay.start()
    try:
        relay.run(stop_on_signals())
    finally:
        relay.close()
