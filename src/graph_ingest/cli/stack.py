"""`graph-ingest stack up | status | down`: the local Kafka, Neo4j and PostgreSQL, no Docker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import CommandFailure, ExitCode, JsonCommand, reports_errors
from graph_ingest.domain.status import StatusCode
from graph_ingest.stack.errors import StackError
from graph_ingest.stack.manager import LocalStack, StackStatus

_UNAVAILABLE = (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED)


def _progress(message: str) -> None:
    click.echo(f"  {message}", err=True)


@contextmanager
def _errors_to_exit() -> Iterator[None]:
    """A stack error: its first line, its details apart; exit 4 when a service is unavailable,
    else 1 (a bad setting goes through ``reports_errors``: exit 2)."""
    try:
        yield
    except StackError as exc:
        failure = CommandFailure(
            str(exc).splitlines()[0],
            code=exc.code,
            exit_code=ExitCode.UNAVAILABLE if exc.code in _UNAVAILABLE else ExitCode.ERROR,
            details=exc.details,
        )
        failure.exit()


def _stack(report: Callable[[str], None] | None = None) -> LocalStack:
    return LocalStack(load_settings(), report=report)


def _print_table(status: StackStatus) -> None:
    click.echo(f"{'service':<9} {'state':<11} {'pid':>7}  {'address':<16} log")
    for s in status.services:
        state = "ready" if s.ready else ("not ready" if s.running else "stopped")
        pid = str(s.pid) if s.pid is not None else "-"
        click.echo(f"{s.name:<9} {state:<11} {pid:>7}  {s.address:<16} {s.log_path}")


@click.group()
def stack() -> None:
    """Run the local stack: real Kafka (KRaft), Neo4j Community and PostgreSQL as processes.

    Data and logs live under GRAPH_INGEST_STACK__RUN_DIR (default .graph-ingest/); jars are
    fetched once with Maven into GRAPH_INGEST_STACK__CACHE_DIR. Needs java 17+, mvn and the
    PostgreSQL server binaries. Everything binds to 127.0.0.1 only.

    \b
    Examples:
      graph-ingest stack up
      graph-ingest stack status --json
      GRAPH_INGEST_STACK__KAFKA_PORT=29092 graph-ingest stack up
      graph-ingest stack down --purge
    """


@stack.command()
@reports_errors
def up() -> None:
    """Start Kafka, Neo4j and PostgreSQL and wait until each answers a real client.

    Idempotent: services already running are left alone; stale pid files are cleaned. Fails
    with the log's last lines when a service does not come up within
    GRAPH_INGEST_STACK__STARTUP_TIMEOUT_S.

    \b
    Examples:
      graph-ingest stack up
      GRAPH_INGEST_STACK__RUN_DIR=/tmp/gi graph-ingest stack up
    """
    started = time.monotonic()
    with _errors_to_exit():
        local = _stack(report=_progress)
        click.echo(f"starting the local stack in {local.layout.root} ...", err=True)
        status = local.up()
    _print_table(status)
    click.echo(f"stack up in {time.monotonic() - started:.1f} s; logs in {local.layout.logs}")


@stack.command(cls=JsonCommand)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@reports_errors
def status(as_json: bool) -> None:
    """Show each service: pid, address, whether it answers, and its log file.

    Exit code 0 when every service is ready, 4 (unavailable) when some service is not.

    \b
    Examples:
      graph-ingest stack status
      graph-ingest stack status --json | jq '.services[] | {name, ready}'
    """
    with _errors_to_exit():
        result = _stack().status()
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        _print_table(result)
    raise SystemExit(ExitCode.OK if result.ready else ExitCode.UNAVAILABLE)


@stack.command()
@click.option("--purge", is_flag=True, help="Also delete the stack's data and logs.")
@reports_errors
def down(purge: bool) -> None:
    """Stop the services this stack started (SIGTERM, SIGKILL only after a timeout).

    Data and logs are kept unless --purge is given.

    \b
    Examples:
      graph-ingest stack down
      graph-ingest stack down --purge
    """
    with _errors_to_exit():
        local = _stack(report=_progress)
        local.down(purge=purge)
    click.echo(f"stack down{' and purged' if purge else ''} ({local.layout.root})")
