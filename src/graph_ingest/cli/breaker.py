"""`graph-ingest breaker status|open|close|release`: force a dependency's circuit breaker for every
worker of the group (through the compacted control topic), and see what is forced."""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from typing import Any

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.domain.breaker_control import KNOWN_DEPENDENCIES, BreakerControl, BreakerMode

_DEPENDENCY = click.argument(
    "dependency", type=click.Choice(KNOWN_DEPENDENCIES), metavar="DEPENDENCY"
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group()
def breaker() -> None:
    """Force circuit breakers for every applier of the group (seed 002 §7.3).

    A forced-open breaker pauses every applier as an open one does (partitions paused, nothing
    taken, nothing dead-lettered); a forced-closed one stays closed whatever fails; release
    hands it back to the failures. Workers obey within about a second, and a worker started
    later obeys too (the control topic is compacted and read from its beginning).
    """


def _view(dependency: str, control: BreakerControl | None) -> dict[str, Any]:
    if control is None:
        return {"dependency": dependency, "mode": BreakerMode.AUTOMATIC.value, "forced": False}
    return {
        **control.model_dump(mode="json"),
        "forced": control.mode is not BreakerMode.AUTOMATIC,
    }


def _show(views: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(views, indent=2))
        return
    for view in views:
        line = f"{view['dependency']:<10} {view['mode']}"
        if "by" in view:
            line += f"  by {view['by']} at {view['at']}: {view['reason'] or '(no reason)'}"
        click.echo(line)


@breaker.command("status", cls=JsonCommand)
@_JSON
@reports_errors
def status(as_json: bool) -> None:
    """Show each dependency's forced mode, and who set it, when and why.

    \b
    Example:
      graph-ingest breaker status --json
    """
    from graph_ingest.kafka.control import read_controls

    controls = read_controls(load_settings())
    _show([_view(name, controls.get(name)) for name in KNOWN_DEPENDENCIES], as_json)


def _forcing(mode: BreakerMode, name: str, summary: str) -> Callable[..., None]:
    @breaker.command(name, cls=JsonCommand, help=summary)
    @_DEPENDENCY
    @click.option("--reason", default="", help="Why (kept with the record, shown by status).")
    @click.option("--by", default=getpass.getuser, show_default="the OS user", help="Who.")
    @_JSON
    @reports_errors
    def command(dependency: str, reason: str, by: str, as_json: bool) -> None:
        from graph_ingest.cli.dlq_common import audit_log
        from graph_ingest.dlq.breaker_admin import force_breaker

        settings = load_settings()
        with audit_log(settings) as audit:
            control = force_breaker(settings, audit, dependency, mode, by=by, reason=reason)
        _show([_view(dependency, control)], as_json)

    return command


open_breaker = _forcing(
    BreakerMode.FORCED_OPEN,
    "open",
    "Force DEPENDENCY's breaker open: every applier pauses.\n\n"
    "\b\nExample:\n  graph-ingest breaker open neo4j --reason 'index rebuild' --by alice",
)
close_breaker = _forcing(
    BreakerMode.FORCED_CLOSED,
    "close",
    "Force DEPENDENCY's breaker closed: failures are retried, never pause the appliers.\n\n"
    "\b\nExample:\n  graph-ingest breaker close neo4j --reason 'flapping probe'",
)
release_breaker = _forcing(
    BreakerMode.AUTOMATIC,
    "release",
    "Hand DEPENDENCY's breaker back to the failures (automatic).\n\n"
    "\b\nExample:\n  graph-ingest breaker release neo4j",
)

__all__ = ["breaker"]
