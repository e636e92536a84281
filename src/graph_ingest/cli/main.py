"""The graph-ingest command line. Commands stay thin: parse, build settings, call a function."""

import logging

import click

from graph_ingest import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="graph-ingest")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """Ingest documents into a Neo4j knowledge graph through frozen, fingerprinted plans.

    Settings come from environment variables prefixed GRAPH_INGEST_ (nested with "__"),
    e.g. GRAPH_INGEST_KAFKA__BOOTSTRAP_SERVERS or GRAPH_INGEST_STACK__RUN_DIR.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _register() -> None:
    from graph_ingest.cli.admin import db, topics
    from graph_ingest.cli.check import check
    from graph_ingest.cli.demo import demo
    from graph_ingest.cli.dlq import dlq
    from graph_ingest.cli.operations import publish_plan, status
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
        resume,
        recover,
        reconcile,
        dlq,
        demo,
        check,
        serve,
    ):
        cli.add_command(command)


_register()


if __name__ == "__main__":
    cli()
