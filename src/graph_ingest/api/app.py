"""The HTTP API as one FastAPI app: its services opened in the lifespan and closed on shutdown,
every error in one JSON shape (``api.errors``), the routes of each area on their own router.

``create_app`` touches nothing: the services open when the app starts (``graph-ingest serve``,
or a test's ``TestClient`` used as a context manager).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from graph_ingest import __version__
from graph_ingest.api import dlq, health, operations
from graph_ingest.api.console import router as console
from graph_ingest.api.errors import ERROR_RESPONSES, install_error_handlers
from graph_ingest.api.services import StoreFactory, open_services
from graph_ingest.settings import Settings

DESCRIPTION = """\
Where is operation X? The read side of graph-ingest: operations and projections (read tables
folded by `graph-ingest worker projector`), the dead-letter queue, and health.

Reads need no token. Every request that changes something needs `Authorization: Bearer <token>`
with a token of `GRAPH_INGEST_API__TOKENS` (name -> token, JSON); its name is recorded as who did
it. Every error is `{"error": {"code", "message", "error_id", "trace_id"}}`.
"""


def create_app(settings: Settings, new_store: StoreFactory) -> FastAPI:
    """The API over the stores of ``settings``; ``new_store`` builds the write store."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.services is not None:  # given (a test): not ours to open or close
            yield
            return
        with open_services(settings, new_store) as services:
            app.state.services = services
            try:
                yield
            finally:
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
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(operations.router)
    app.include_router(dlq.router)
    app.include_router(console.router)  # /ui: the operator console (HTML, not in /openapi.json)
    return app


__all__ = ["create_app"]
