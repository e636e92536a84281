"""`graph-ingest serve`: the HTTP API (operations, projections, the DLQ, health) under uvicorn."""

from __future__ import annotations

import logging

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import reports_errors


@click.command("serve")
@click.option("--host", help="The address to bind (default: API__HOST, 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), help="The port to bind (default: API__PORT, 8080)."
)
@reports_errors
def serve(host: str | None, port: int | None) -> None:
    """Serve the HTTP API until SIGINT or SIGTERM.

    Its OpenAPI document is at /openapi.json, the docs at /docs, health at /health/live,
    /health/ready and /health/startup, Prometheus metrics at /metrics. Reads need no token; requests that change something
    (replay, purge, redrive tasks, forced breakers) need `Authorization: Bearer <token>`, a token of GRAPH_INGEST_API__TOKENS
    (a JSON object of name -> token; the name is recorded as who did it).

    \b
    Examples:
      GRAPH_INGEST_API__TOKENS='{"alice": "s3cret-token"}' graph-ingest serve --port 8080
      curl -s http://127.0.0.1:8080/api/v1/dlq/stats
    """
    import uvicorn
    from prometheus_client import CollectorRegistry

    from graph_ingest.api.app import create_app
    from graph_ingest.observability.exposition import serving_metrics, without_created_series
    from graph_ingest.wiring import postgres_store, scrape_collectors

    settings = load_settings()
    api = settings.api.model_copy(
        update={
            name: value for name, value in (("host", host), ("port", port)) if value is not None
        }
    )
    without_created_series()
    registry = CollectorRegistry()
    app = create_app(settings.model_copy(update={"api": api}), postgres_store, registry=registry)
    # Logging is the CLI's (-v); a line per request only from -v on.
    access_log = logging.getLogger().isEnabledFor(logging.INFO)
    # /metrics is the app's own route: the collectors are only registered here, nothing else
    # served.
    not_served = settings.metrics.model_copy(update={"port": None})
    with serving_metrics(not_served, registry, scrape_collectors(settings, "api")):
        uvicorn.run(app, host=api.host, port=api.port, log_config=None, access_log=access_log)
