"""`graph-ingest projections …`: the read side's projections, as an operator sees them."""

import json
from dataclasses import asdict

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import reports_errors


@click.group()
def projections() -> None:
    """The read tables the projector folds (schema <POSTGRES__SCHEMA_NAME>_read)."""


@projections.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the lag as JSON.")
@reports_errors
def status(as_json: bool) -> None:
    """Show each projection's lag and state.

    Lag in three units: offsets behind the end of its topic, seconds behind (how long the
    oldest unfolded event has waited, from its own timestamp), and the age of the last event
    folded. State: idle (nothing to fold), catching_up, or stalled (behind, and its position
    has not moved for PROJECTOR__STALLED_AFTER_S).

    \b
    Example:
      graph-ingest projections status --json
    """
    from graph_ingest.projections.lag_reader import operations_lag
    from graph_ingest.projections.tables import ReadTables

    settings = load_settings()
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        lag = operations_lag(settings, tables)
    finally:
        tables.close()
    if as_json:
        click.echo(json.dumps([asdict(lag)], indent=2))
        return
    age = "never" if lag.last_event_age_s is None else f"{lag.last_event_age_s:.1f}s ago"
    click.echo(
        f"{lag.projection}  {lag.state.value}  behind {lag.offsets_behind} offsets, "
        f"{lag.seconds_behind:.1f}s  last event {age}"
    )
