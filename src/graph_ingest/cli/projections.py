"""`graph-ingest projections …`: the read side's projections, as an operator sees them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, JsonCommand, reports_errors
from graph_ingest.cli.signals import stopping_on_signals

if TYPE_CHECKING:
    from graph_ingest.projections.lag import ProjectionLag
    from graph_ingest.projections.rebuild import RebuildOutcome


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
    has not moved for PROJECTOR__STALLED_AFTER_S). While `projections rebuild` runs, its
    tables are listed too, rebuilding, with the offsets done and still to do.

    \b
    Example:
      graph-ingest projections status --json
    """
    from graph_ingest.projections.lag_reader import projections_lag
    from graph_ingest.projections.tables import ReadTables

    settings = load_settings()
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        lags = projections_lag(settings, tables)
    finally:
        tables.close()
    if as_json:
        click.echo(json.dumps([asdict(lag) for lag in lags], indent=2))
        return
    for lag in lags:
        click.echo(_lag_line(lag))


def _lag_line(lag: ProjectionLag) -> str:
    if lag.progress is not None:
        done, to_do = lag.progress.done, lag.progress.to_do
        return f"{lag.projection}  {lag.state.value}  {done} offsets done, {to_do} to do"
    age = "never" if lag.last_event_age_s is None else f"{lag.last_event_age_s:.1f}s ago"
    return (
        f"{lag.projection}  {lag.state.value}  behind {lag.offsets_behind} offsets, "
        f"{lag.seconds_behind:.1f}s  last event {age}"
    )


@projections.command("rebuild", cls=JsonCommand)
@click.option("--dry-run", is_flag=True, help="Build and compare; leave the live tables.")
@click.option(
    "--wait-live",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for the live projector to reach the rebuild's positions.",
)
@click.option("--discard", is_flag=True, help="Drop an unfinished rebuild's tables instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@reports_errors
def rebuild(dry_run: bool, wait_live: float, discard: bool, as_json: bool) -> None:
    """Fold fresh read tables from offset zero beside the live ones, compare, switch.

    The live tables keep serving (and the projector keeps folding into them) while the rebuild
    folds every projected topic into <schema>_read_rebuild. Once it has caught up with the live
    projector's positions, both are compared table by table (row count and a digest of the
    columns the queries read) and, if every table matches, switched in one transaction.
    Stopped (Ctrl-C), it keeps what it folded: run it again to go on. One rebuild at a time.

    Exit codes: 0 switched (or a dry run that matched), 1 a table differs (nothing switched;
    the rebuild's tables are kept for a look), 5 refused (another rebuild runs, the live
    projector is behind), 130 interrupted.

    \b
    Examples:
      graph-ingest projections rebuild --dry-run
      graph-ingest projections rebuild --json
    """
    from graph_ingest.projections.rebuild import Rebuild

    with stopping_on_signals() as stop:
        run = Rebuild(
            load_settings(), dry_run=dry_run, wait_live_s=wait_live, progress=_progress_line()
        )
        if discard:
            run.discard()
            click.echo(f"dropped {run.schema}")
            return
        outcome = run.run(stop)
    show_outcome(outcome, as_json=as_json)
    raise SystemExit(outcome_exit_code(outcome))


def _progress_line(every_s: float = 2.0) -> Callable[[int], None]:
    """A line on stderr at most every ``every_s``: how many messages the rebuild has folded."""
    folded = 0
    shown_at = time.monotonic()

    def progress(count: int) -> None:
        nonlocal folded, shown_at
        folded += count
        if time.monotonic() - shown_at >= every_s:
            shown_at = time.monotonic()
            click.echo(f"rebuilding: {folded} messages folded", err=True)

    return progress


def outcome_exit_code(outcome: RebuildOutcome) -> ExitCode:
    if not outcome.completed:
        return ExitCode.INTERRUPTED
    return ExitCode.ERROR if outcome.differing else ExitCode.OK


def show_outcome(outcome: RebuildOutcome, *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**asdict(outcome), "differing": outcome.differing}, indent=2))
        return
    if not outcome.completed:
        click.echo(
            f"interrupted after {outcome.folded} messages: {outcome.rebuild_schema} keeps them; "
            "run the rebuild again to go on",
            err=True,
        )
        return
    click.echo(
        f"{outcome.rebuild_schema}: {outcome.folded} messages folded; compared with "
        f"{outcome.live_schema} at the same positions in {outcome.partitions} partitions"
    )
    click.echo(f"{'table':<24} {'live rows':>10} {'rebuilt rows':>12}  live digest / rebuilt")
    for table in outcome.tables:
        live, rebuilt = table.live, table.rebuilt
        click.echo(
            f"{table.table:<24} {live.rows if live else '-':>10} "
            f"{rebuilt.rows if rebuilt else '-':>12}  {live.digest if live else '-'} / "
            f"{rebuilt.digest if rebuilt else '-'}  {'same' if table.same else 'DIFFERS'}"
        )
    if outcome.differing:
        click.echo(
            f"not switched: {', '.join(outcome.differing)} differ(s); {outcome.rebuild_schema} "
            "is kept for a look (`projections rebuild --discard` drops it)",
            err=True,
        )
    elif outcome.switched:
        click.echo(f"switched: {outcome.live_schema} now holds the rebuilt tables")
    else:
        click.echo(f"dry run: every table matches; {outcome.live_schema} left as it was")
