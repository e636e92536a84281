"""`graph-ingest demo`: the pipeline end to end on the local real services."""

import logging

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, reports_errors


@click.command("demo")
@reports_errors
def demo() -> None:
    """Bring the local stack up, apply a handful of sample plans, print what happened.

    Starts Kafka, Neo4j and PostgreSQL if they are not running (first run downloads jars),
    creates topics, migrates, runs an applier and the outbox relay in this process, publishes
    two versions of one document, a second document sharing an entity, and a stale plan that
    must end in CONFLICT. The stack keeps running afterwards: `graph-ingest stack down` stops it.

    \b
    Example:
      graph-ingest demo
    """
    from graph_ingest.demo.run import run_demo

    # A broker that just started answers "coordinator load in progress" for a moment; the
    # client retries by itself, so these warnings would only alarm a first-time reader.
    logging.getLogger("graph_ingest.kafka.client").setLevel(logging.ERROR)

    if not run_demo(load_settings(), click.echo):
        raise SystemExit(ExitCode.ERROR)
    click.echo(
        "demo finished: every operation ended where it should.\n"
        "  follow one:     graph-ingest status <operation id> [--json]\n"
        "  stop the stack: graph-ingest stack down"
    )
