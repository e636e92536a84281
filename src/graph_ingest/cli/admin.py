"""`graph-ingest topics …` and `graph-ingest db …`: one-off setup commands, all idempotent."""

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import reports_errors


@click.group()
def topics() -> None:
    """Kafka topics of the pipeline."""


@topics.command("create")
@reports_errors
def topics_create() -> None:
    """Create the plans topic and the compacted operation log (idempotent).

    Partitions, names and retention come from GRAPH_INGEST_TOPICS__* settings.

    \b
    Example:
      GRAPH_INGEST_TOPICS__PLAN_PARTITIONS=12 graph-ingest topics create
    """
    from graph_ingest.kafka.admin import ensure_topics

    for report in ensure_topics(load_settings()):
        click.echo(str(report))


@click.group()
def db() -> None:
    """PostgreSQL schema of the pipeline."""


@db.command("migrate")
@reports_errors
def db_migrate() -> None:
    """Apply pending schema migrations (idempotent; safe to run from several workers at once).

    Workers may go on writing while it runs: an index on a table they write builds
    CONCURRENTLY. If such a build fails part way, run it again: it drops the invalid index the
    failure left and builds it anew. A change to a table's storage (0016: lz4 compression) locks
    one table at a time, for an instant, after the transactions in progress on it. What a
    migration warns of (a server without lz4) is logged.

    \b
    Example:
      GRAPH_INGEST_POSTGRES__SCHEMA_NAME=graph_ingest graph-ingest db migrate
    """
    from graph_ingest.store.migrate import migrate

    settings = load_settings()
    applied = migrate(settings.postgres)
    schema = settings.postgres.schema_name
    if applied:
        click.echo(f"schema {schema}: applied {', '.join(applied)}")
    else:
        click.echo(f"schema {schema}: up to date")
