"""`graph-ingest check`: ask a worker's (or the API's) health endpoint, for scripts and probes."""

import json

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, reports_errors


@click.command("check")
@click.option(
    "--url",
    metavar="URL",
    help="Where the health endpoints are (default: http://<HEALTH__HOST>:<HEALTH__PORT>).",
)
@click.option(
    "--ready", "probe", flag_value="ready", default=True, help="Ask /health/ready (default)."
)
@click.option("--live", "probe", flag_value="live", help="Ask /health/live.")
@click.option("--startup", "probe", flag_value="startup", help="Ask /health/startup.")
@click.option(
    "--timeout", "timeout_s", type=float, default=5.0, show_default=True, help="Seconds to wait."
)
@reports_errors
def check(url: str | None, probe: str, timeout_s: float) -> None:
    """Print a health endpoint's JSON; exit 0 when it says healthy (ready, live or started as
    asked), 1 otherwise, or when nothing answers there.

    A degraded worker (a dependency's breaker open, its partitions paused) is not ready (exit 1)
    but stays live (exit 0).

    \b
    Examples:
      graph-ingest check --url http://127.0.0.1:8081 --ready
      GRAPH_INGEST_HEALTH__PORT=8081 graph-ingest check --live
    """
    from graph_ingest.observability.check import HealthUnreachable, ask

    if url is None:
        health = load_settings().health
        if health.port is None:
            raise click.UsageError("give --url, or set GRAPH_INGEST_HEALTH__PORT")
        url = f"http://{health.host}:{health.port}"
    try:
        answer = ask(url, probe, timeout_s=timeout_s)
    except HealthUnreachable as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(ExitCode.ERROR) from exc
    click.echo(json.dumps(answer.body, indent=2, sort_keys=True))
    raise SystemExit(ExitCode.OK if answer.status == 200 else ExitCode.ERROR)
