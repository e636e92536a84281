"""The HTTP API as one FastAPI app: its services opened in the lifespan and closed on shutdown,
every error in one JSON shape (``api.errors``), the routes of each area on their own router.

``create_app`` touches nothing: the services open when the app starts (``graph-ingest serve``,
or a test's ``TestClient`` used as a context manager). If PostgreSQL is out of reach then, the
app serves anyway (live; startup and ready 503 saying why; every other route 503) and keeps
trying to open them, backing off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager, suppress

import anyio.to_thread
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from graph_ingest import __version__
from graph_ingest.api import admin, dlq, health, operations, reads, tasks
from graph_ingest.api.console import router as console
from graph_ingest.api.errors import ERROR_RESPONSES, install_error_handlers
from graph_ingest.api.metrics import install_metrics
from graph_ingest.api.services import StoreFactory, open_services
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.observability.metrics import worker_info
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)

RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 30.0
"""How the API tries again to open its services while PostgreSQL is out of reach at start."""

DESCRIPTION = """\
Where is operation X? The read side of graph-ingest: operations and projections (read tables
folded by `graph-ingest worker projector`), the dead-letter queue, and health.

Reads need no token. Every request that changes something (replay, purge, redrive tasks, the
admin routes that force a circuit breaker) needs `Authorization: Bearer <token>` with a token of
`GRAPH_INGEST_API__TOKENS` (name -> token, JSON); its name is recorded in the audit log
(`GET /api/v1/audit`) as who did it, with the reason given. Every error is
`{"error": {"code", "message", "error_id", "trace_id"}}`.
"""


def create_app(
    settings: Settings, new_store: StoreFactory, *, registry: CollectorRegistry | None = None
) -> FastAPI:
    """The API over the stores of ``settings``; ``new_store`` builds the write store. Its
    metrics (``/metrics``: the HTTP requests, the process's info, and whatever else is
    registered on ``registry``) go on ``registry``, a fresh one by default."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.services is not None:  # given (a test): not ours to open or close
            yield
            return
        with ExitStack() as opened:
            retrying = None
            if not await _open(app, settings, new_store, opened):
                retrying = asyncio.create_task(_keep_opening(app, settings, new_store, opened))
            try:
                yield
            finally:
                if retrying is not None:
                    retrying.cancel()
                    with suppress(asyncio.CancelledError):
                        await retrying
                app.state.services = None

    app = FastAPI(
        title="graph-ingest",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.state.tokens = settings.api.tokens
    app.state.services = None
    app.state.not_started = None
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(operations.router)
    app.include_router(reads.router)
    app.include_router(tasks.router)
    app.include_router(admin.router)
    app.include_router(dlq.router)
    app.include_router(console.router)  # /ui: the operator console (HTML, not in /openapi.json)
    registry = registry if registry is not None else CollectorRegistry()
    worker_info(registry, "api", worker_id="api", group="", protocol="")
    install_metrics(app, registry)
    return app


async def _open(
    app: FastAPI, settings: Settings, new_store: StoreFactory, opened: ExitStack
) -> bool:
    """Open the services into ``opened`` (on a worker thread: it connects); False, the reason
    kept for /health/startup, when a backing service cannot be reached."""
    try:
        app.state.services = await anyio.to_thread.run_sync(
            opened.enter_context, open_services(settings, new_store)
        )
    except GraphIngestError as exc:
        app.state.not_started = f"{exc.code}: {exc}"
        return False
    app.state.not_started = None
    return True


async def _keep_opening(
    app: FastAPI, settings: Settings, new_store: StoreFactory, opened: ExitStack
) -> None:
    """Try again, backing off, until the services open: the API stays up (live, not ready,
    each route 503) through an outage at its start instead of exiting into a restart loop."""
    backoff = Backoff(initial_s=RETRY_INITIAL_S, max_s=RETRY_MAX_S)
    while True:
        delay = backoff.failed()
        log.warning(
            "API services not open (%s): trying again in %.1f s", app.state.not_started, delay
        )
        await asyncio.sleep(delay)
        if await _open(app, settings, new_store, opened):
            log.warning("API services open after %d failed tries", backoff.succeeded())
            return


__all__ = ["create_app"]
