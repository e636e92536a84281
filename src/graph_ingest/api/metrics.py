"""The API's own metrics and its ``/metrics`` route: requests by method, route template and
status, and their durations by route template (never the path: ids stay out of labels), counted
by an ASGI middleware around the app, so that no route counts anything itself."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Response
from fastapi.routing import APIRoute
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from graph_ingest.observability.families import HTTP_BUCKETS

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404 of an unknown path)."""


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "graph_ingest_http_requests_total",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "graph_ingest_http_request_duration_seconds",
            "Seconds to answer an HTTP request, by route template",
            ["route"],
            buckets=HTTP_BUCKETS,
            registry=registry,
        )

    def known_routes(self, app: FastAPI) -> None:
        """Create every route template's duration at 0 (statuses are not known in advance)."""
        for route in app.routes:
            if isinstance(route, APIRoute):
                self.duration.labels(route=route.path)


class MetricsMiddleware:
    """Counts every HTTP request the app answers (``HttpMetrics``)."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.metrics.requests.labels(
                method=scope.get("method", ""), route=route, status=str(status)
            ).inc()
            self.metrics.duration.labels(route=route).observe(time.perf_counter() - started)


def install_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    """Serve ``registry`` at ``GET /metrics`` and count the app's requests on it."""

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    http = HttpMetrics(registry)
    http.known_routes(app)
    app.add_middleware(MetricsMiddleware, metrics=http)


__all__ = ["HttpMetrics", "MetricsMiddleware", "install_metrics"]
