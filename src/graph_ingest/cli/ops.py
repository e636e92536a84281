"""`graph-ingest ops list`: operations from the read tables, filtered and paged; and the read
service as the commands open it (``status``, ``ops``, ``submit --wait``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click
from pydantic import BaseModel

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.cli.params import Duration
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.settings import Settings

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.projections.fold import OperationStatus
    from graph_ingest.projections.operation_views import StatusViews
    from graph_ingest.projections.queries import OperationPage, OperationQueries
    from graph_ingest.store.base import OperationStore

_CODES = [code.value for code in StatusCode if code is not StatusCode.OK]


@contextmanager
def read_service(settings: Settings) -> Iterator[tuple[OperationQueries, OperationStore]]:
    """The read service over the read tables, and the write side's store it reads committed
    sequences from, both started for the block."""
    from graph_ingest.projections.queries import OperationQueries
    from graph_ingest.projections.tables import ReadTables
    from graph_ingest.wiring import postgres_store

    store = postgres_store(settings)
    tables = ReadTables(settings.postgres)
    store.start()
    try:
        tables.start()
        try:
            yield OperationQueries(tables, committed=store), store
        finally:
            tables.close()
    finally:
        store.close()


@contextmanager
def status_views(settings: Settings) -> Iterator[StatusViews]:
    """The status views over the read service and the write side's readers (``status``)."""
    from graph_ingest.projections.operation_views import StatusViews

    with read_service(settings) as (queries, store):
        yield StatusViews(queries, store)


@click.group("ops")
def ops() -> None:
    """Operations as the read tables show them (`graph-ingest worker projector` folds them);
    `graph-ingest status OP_ID` shows one.

    \b
    Example:
      graph-ingest ops list --stage DEAD_LETTERED --space kb
    """


@ops.command("list", cls=JsonCommand)
@click.option(
    "--stage",
    type=click.Choice([stage.value for stage in Stage], case_sensitive=False),
    metavar="STAGE",
    help="Only operations at this stage, e.g. FAILED, PARKED, DEAD_LETTERED.",
)
@click.option("--space", help="Only operations of documents in this space.")
@click.option("--document", metavar="ID", help="Only operations of this document.")
@click.option(
    "--error-code",
    type=click.Choice(_CODES, case_sensitive=False),
    metavar="CODE",
    help="Only operations whose last error has this status code, e.g. UNAVAILABLE.",
)
@click.option(
    "--older-than",
    type=Duration(),
    metavar="DURATION",
    help="Only operations not updated for at least this long (stuck ones), e.g. 30s, 5m, 2h.",
)
@click.option(
    "--limit",
    type=int,
    default=50,
    show_default=True,
    help="At most this many operations per page (1 to 1000).",
)
@click.option("--cursor", metavar="C", help="Continue after the page that printed this cursor.")
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@reports_errors
def list_operations(
    stage: str | None,
    space: str | None,
    document: str | None,
    error_code: str | None,
    older_than: float | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
) -> None:
    """List operations, last updated first, a page at a time: stage, attempts, document, last
    error, when last updated. The next page's cursor is printed last (none on the last page).

    \b
    Examples:
      graph-ingest ops list --stage FAILED --older-than 10m
      graph-ingest ops list --space kb --document notes-1 --json
      graph-ingest ops list --error-code UNAVAILABLE --cursor eyJ…
    """
    from graph_ingest.projections.queries import InvalidQuery, OperationFilter

    settings = load_settings()
    with read_service(settings) as (queries, store):
        where = OperationFilter(
            stage=None if stage is None else Stage(stage.upper()),
            space=space,
            document=document,
            error_code=None if error_code is None else StatusCode(error_code.upper()),
            older_than=(
                None
                if older_than is None
                else store.database_time() - timedelta(seconds=older_than)
            ),
        )
        try:
            page = queries.list_operations(where, limit=limit, cursor=cursor)
        except InvalidQuery as exc:  # a bad limit or cursor: a usage error (exit 2)
            raise click.UsageError(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(_page_json(page), indent=2, default=json_default))
        return
    for status in page.operations:
        click.echo(_line(status))
    click.echo(f"next cursor {page.next_cursor}" if page.next_cursor else "last page")


def json_default(value: object) -> object:
    """What ``json.dumps`` cannot write itself in a read-side value: times, and the pydantic
    values it carries (last errors, failure details)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _page_json(page: OperationPage) -> dict[str, object]:
    return {
        "operations": [asdict(status) for status in page.operations],
        "next_cursor": page.next_cursor,
    }


def _line(status: OperationStatus) -> str:
    error = status.last_error.code.value if status.last_error else "-"
    return (
        f"{status.operation_id}  {status.stage:<15} attempts {status.attempts:<3} "
        f"{status.space}/{status.document_id}  {error}  {status.updated_at.isoformat()}"
    )
