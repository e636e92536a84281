"""`graph-ingest errors report`: every failure in a time range, grouped by code and class."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from typing import TYPE_CHECKING

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.cli.params import TIME_EXAMPLE, AwareDateTime

if TYPE_CHECKING:
    from graph_ingest.projections.errors_report import ErrorsReport

FORMATS = ("table", "json", "csv")
_CSV_COLUMNS = (
    "code",
    "error_class",
    "failures",
    "operations",
    "first_seen",
    "last_seen",
    "example_operation_ids",
)


@click.group()
def errors() -> None:
    """Failures as the read tables record them (the projector's fold of the operations)."""


@errors.command("report", cls=JsonCommand)
@click.option(
    "--from", "start", type=AwareDateTime(), required=True, help=f"From (e.g. {TIME_EXAMPLE})."
)
@click.option("--to", "end", type=AwareDateTime(), required=True, help="Up to, not included.")
@click.option("--format", "output", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (--format json).")
@reports_errors
def report(start: datetime, end: datetime, output: str, as_json: bool) -> None:
    """Report every failure between --from and --to, grouped by code and error class.

    A failure is an attempt that failed, a dead-lettering, a conflict or a parking, each
    counted once: per group the failures, the operations they hit, first and last seen, and up
    to 5 example operation ids. Exit code 2 for a range that is empty or backwards.

    \b
    Examples:
      graph-ingest errors report --from 2026-12-01T00:00:00Z --to 2026-12-02T00:00:00Z
      graph-ingest errors report --from 2026-12-01T09:00:00Z --to 2026-12-01T10:00:00Z --format csv
    """
    from graph_ingest.projections.errors_report import ErrorsReports, check_range
    from graph_ingest.projections.queries import InvalidQuery
    from graph_ingest.projections.tables import ReadTables

    try:
        check_range(start, end)
    except InvalidQuery as exc:
        raise click.BadParameter(str(exc), param_hint="'--from' / '--to'") from None
    tables = ReadTables(load_settings().postgres)
    tables.start()
    try:
        found = ErrorsReports(tables).report(start, end)
    finally:
        tables.close()
    click.echo(_rendered(found, "json" if as_json else output), nl=False)


def _rendered(found: ErrorsReport, output: str) -> str:
    from graph_ingest.projections.errors_report import report_json

    if output == "json":
        return json.dumps(report_json(found), indent=2) + "\n"
    if output == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(_CSV_COLUMNS)
        for group in report_json(found)["groups"]:
            examples = " ".join(group["example_operation_ids"])
            writer.writerow([*(group[c] for c in _CSV_COLUMNS[:-1]), examples])
        return buffer.getvalue()
    return _table(found)


def _table(found: ErrorsReport) -> str:
    heading = (
        f"{found.failures} failure(s) from {found.start.isoformat()} to {found.end.isoformat()}"
    )
    lines = [heading]
    if found.groups:
        lines.append(f"{'FAILURES':>8}  {'OPS':>5}  {'CODE':<20} {'CLASS':<28} FIRST / LAST SEEN")
    for group in found.groups:
        lines.append(
            f"{group.failures:>8}  {group.operations:>5}  {group.code:<20} {group.error_class:<28} "
            f"{group.first_seen.isoformat()} / {group.last_seen.isoformat()}"
        )
        lines.append(f"{'':>17}e.g. {', '.join(group.example_operation_ids)}")
    return "\n".join(lines) + "\n"
