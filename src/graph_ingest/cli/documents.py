"""`graph-ingest doc show SPACE DOC`: one document as the read side holds it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import orjson

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import CommandFailure, JsonCommand, reports_errors
from graph_ingest.domain.status import StatusCode

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.projections.document_fold import DocumentView


@click.group("doc")
def doc() -> None:
    """Documents as the read tables hold them (schema <POSTGRES__SCHEMA_NAME>_read)."""


@doc.command("show", cls=JsonCommand)
@click.argument("space")
@click.argument("document_id")
@click.option("--json", "as_json", is_flag=True, help="Print the document as JSON.")
@reports_errors
def show(space: str, document_id: str, as_json: bool) -> None:
    """Show document DOCUMENT_ID of SPACE: its current revision and version (what its last
    COMPLETED operation that changes state made it) and every operation of it, oldest first,
    with its stage. From the read tables the projector folds (`graph-ingest worker projector`).

    Exit code 3 when no operation of the document was seen.

    \b
    Example:
      graph-ingest doc show demo acme-2024 --json
    """
    from graph_ingest.projections.documents import DocumentQueries
    from graph_ingest.projections.tables import ReadTables

    tables = ReadTables(load_settings().postgres)
    tables.start()
    try:
        view = DocumentQueries(tables).document_view(space, document_id)
    finally:
        tables.close()
    if view is None:
        CommandFailure(
            f"document {space}/{document_id} not found: no operation of it was seen (is the "
            "projector running? `graph-ingest projections status` shows how far it has folded)",
            code=StatusCode.NOT_FOUND,
        ).exit()
    if as_json:
        click.echo(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode("utf-8"))
        return
    for line in _lines(view):
        click.echo(line)


def _lines(view: DocumentView) -> list[str]:
    current = (
        f"{view.revision} (operation {view.operation_id}, completed {view.completed_at:%Y-%m-%dT%H:%M:%S%z})"
        if view.operation_id
        else "0 (no operation has completed)"
    )
    # an operation event v1 does not say which version its plan made
    version = view.document_version or ("not recorded" if view.operation_id else "none")
    lines = [
        f"document   {view.space}/{view.document_id}",
        f"revision   {current}",
        f"version    {version}",
        f"operations {len(view.operations)}, oldest first",
    ]
    for o in view.operations:
        kind = o.plan_kind.value if o.plan_kind else "-"
        lines.append(
            f"  {o.operation_id}  base revision {o.expected_revision}  {o.stage.value:<15} "
            f"{kind:<10} seq {o.sequence}  updated {o.updated_at.isoformat()}"
        )
    return lines
