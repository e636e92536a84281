"""The graph-ingest command line. Commands stay thin: parse, build settings, call a function."""

import click

from graph_ingest import __version__
from graph_ingest.cli.config import InvalidSetting, load_log_settings
from graph_ingest.observability.logs import configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="graph-ingest")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="More log output (-v info, -vv debug). Default: warnings only, and a worker's own "
    "lifecycle lines (started, assignments, stopped).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Log lines on stderr as text or as one JSON object per line (default: "
    "GRAPH_INGEST_LOG__FORMAT, text).",
)
def cli(verbose: int, log_format: str | None) -> None:
    """Ingest documents into a Neo4j knowledge graph through frozen, fingerprinted plans.

    Settings come from environment variables prefixed GRAPH_INGEST_ (nested with "__"),
    e.g. GRAPH_INGEST_KAFKA__BOOTSTRAP_SERVERS or GRAPH_INGEST_STACK__RUN_DIR.
    """
    try:
        settings = load_log_settings()
    except InvalidSetting as exc:
        raise click.UsageError(str(exc)) from None
    if log_format is not None:
        settings = settings.model_copy(update={"format": log_format})
    configure_logging(settings, verbose)


def _register() -> None:
    from graph_ingest.cli.admin import db, topics
    from graph_ingest.cli.audit import audit
    from graph_ingest.cli.breaker import breaker
    from graph_ingest.cli.check import check
    from graph_ingest.cli.demo import demo
    from graph_ingest.cli.dlq import dlq
    from graph_ingest.cli.documents import doc
    from graph_ingest.cli.errors_report import errors
    from graph_ingest.cli.operations import publish_plan, status
    from graph_ingest.cli.ops import ops
    from graph_ingest.cli.projections import projections
    from graph_ingest.cli.reconcile import reconcile
    from graph_ingest.cli.recovery import recover, resume
    from graph_ingest.cli.serve import serve
    from graph_ingest.cli.stack import stack
    from graph_ingest.cli.submit import retract, submit
    from graph_ingest.cli.worker import worker

    for command in (
        stack,
        topics,
        db,
        worker,
        projections,
        submit,
        retract,
        publish_plan,
        status,
        ops,
        doc,
        resume,
        recover,
        reconcile,
        dlq,
        audit,
        breaker,
        errors,
        demo,
        check,
        serve,
    ):
        cli.add_command(command)


_register()


if __name__ == "__main__":
    cli()
