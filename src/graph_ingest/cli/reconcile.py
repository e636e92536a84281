"""`graph-ingest reconcile`: does the graph hold what the committed document states say?"""

import json

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, JsonCommand, reports_errors


@click.command("reconcile", cls=JsonCommand)
@click.option("--space", help="Only documents of this space.")
@click.option("--document", "document_id", help="Only documents with this id.")
@click.option(
    "--repair",
    is_flag=True,
    help="Re-apply, per drifted document, its last committed plan's writes of the drifted "
    "elements, then check again.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--page-size",
    type=click.IntRange(1, 10_000),
    default=500,
    show_default=True,
    help="Document states read (and checked against the graph) at a time.",
)
@reports_errors
def reconcile(
    space: str | None, document_id: str | None, repair: bool, as_json: bool, page_size: int
) -> None:
    """Compare the graph with the committed document states; report (or repair) drift.

    For every committed document state (of --space / --document, if given), checks in Neo4j,
    with read transactions, the node ids and edge keys the state says the graph holds. A
    document drifts when the graph lacks one of them (missing) or still holds an edge that the
    state's revision removed (unexpected: a superseded edge no other document claims). Nothing is
    written unless --repair is given.

    --repair re-applies, for each drifted document, the part of the frozen plan of its last
    committed operation that upserts the missing elements and deletes the unexpected edges,
    under the document's lock, only if the document is still at the revision that was checked
    and no operation of it is in flight (otherwise it is skipped with the reason); then it
    checks again.

    Drift found in a document with an operation in flight may be transient: run it again.

    Exit codes: 0 no drift (after --repair: none left), 1 drift found (or left, or a document
    could not be checked), 4 a service is unavailable.

    \b
    Examples:
      graph-ingest reconcile
      graph-ingest reconcile --space acme --json
      graph-ingest reconcile --space acme --document notes-1843 --repair
    """
    from graph_ingest.graph.neo4j import Neo4jGraphWriter
    from graph_ingest.reconcile.report import render_text, to_json
    from graph_ingest.reconcile.service import Reconciler
    from graph_ingest.wiring import postgres_store, started

    settings = load_settings()
    store = postgres_store(settings)
    graph = Neo4jGraphWriter(settings.neo4j)
    with started(store, graph):
        result = Reconciler(store, graph, page_size=page_size).run(
            space=space, document_id=document_id, repair=repair
        )
    click.echo(json.dumps(to_json(result), indent=2) if as_json else render_text(result))
    if result.final.has_drift:
        raise SystemExit(ExitCode.ERROR)
