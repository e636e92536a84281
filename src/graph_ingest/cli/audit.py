"""`graph-ingest audit`: who replayed, purged, redrove or forced a breaker, when and why."""

from __future__ import annotations

import json
from datetime import datetime

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.dlq_common import audit_log
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.cli.params import TIME_EXAMPLE, AwareDateTime
from graph_ingest.dlq.audit import AuditAction

_ACTIONS = [action.value for action in AuditAction]


@click.command("audit", cls=JsonCommand)
@click.option(
    "--since",
    type=AwareDateTime(),
    help=f"Only actions at or after this time, e.g. {TIME_EXAMPLE}.",
)
@click.option(
    "--action",
    type=click.Choice(_ACTIONS),
    metavar="ACTION",
    help="Only this action: " + ", ".join(_ACTIONS) + ".",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="The newest this many.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@reports_errors
def audit(since: datetime | None, action: str | None, limit: int, as_json: bool) -> None:
    """The audit log, oldest first: every DLQ replay, purge, redrive start and cancel, and forced
    breaker change, with who did it (an API token's name, or the CLI's --by, default
    $USER@host), when, on what, and why.

    \b
    Examples:
      graph-ingest audit --since 2026-12-01T00:00:00Z
      graph-ingest audit --action dlq.purge --json | jq '.entries[].reason'
    """
    from graph_ingest.dlq.audit import audit_entry_json
    from graph_ingest.store.audit import AuditQuery

    with audit_log(load_settings()) as log:
        found = log.entries(AuditQuery(since=since, action=action, limit=limit))
    if as_json:
        click.echo(json.dumps({"entries": [audit_entry_json(e) for e in found]}, indent=2))
        return
    if not found:
        click.echo("no audit entries match")
    for entry in found:
        record = entry.record
        click.echo(
            f"{entry.at.isoformat()}  {record.action:<20}  {record.actor}  "
            f"{','.join(record.target)}" + (f"  reason: {record.reason}" if record.reason else "")
        )
