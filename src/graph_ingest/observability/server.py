"""The health endpoints over HTTP, beside a worker: ``/health/live``, ``/health/ready`` and
``/health/startup`` (``observability.probes``), JSON bodies.

A stdlib ``ThreadingHTTPServer`` on a daemon thread: the worker is a synchronous loop on
threads, not an asyncio app, so an ASGI stack would bring an event loop and dependencies for
three GET routes; a thread per request means a slow or stuck client never delays another probe,
and a request only copies the state under its lock, so serving never slows the loop. Daemon
threads never keep a stopping worker alive.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.hooks import LoopSubscriber
from graph_ingest.observability import probes
from graph_ingest.observability.health import HealthSubscriber
from graph_ingest.observability.probes import ProbeAnswer
from graph_ingest.settings.health import HealthSettings

log = logging.getLogger(__name__)

Routes = Mapping[str, Callable[[], ProbeAnswer]]
ReadyDetails = Callable[[], Mapping[str, Any]]
"""What a worker adds to its readiness body (the projector: its lag); it must answer fast."""


def routes(
    subscriber: HealthSubscriber, settings: HealthSettings, details: ReadyDetails | None = None
) -> Routes:
    """Each path and the probe that answers it, on a fresh snapshot per request."""
    max_age_s = settings.live_max_age_s
    return {
        "/health/live": lambda: probes.live(subscriber.snapshot(), max_age_s),
        "/health/ready": lambda: probes.ready(
            subscriber.snapshot(), max_age_s, details() if details else None
        ),
        "/health/startup": lambda: probes.startup(subscriber.snapshot()),
    }


class _Server(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], routes: Routes) -> None:
        self.routes = routes
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # the name http.server dispatches GET to
        routes = self.server.routes
        route = routes.get(self.path.split("?", 1)[0].rstrip("/"))
        if route is None:
            body = {"error": f"no such path {self.path}", "paths": sorted(routes)}
            answer = ProbeAnswer(HTTPStatus.NOT_FOUND, body)
        else:
            answer = route()
        raw = json.dumps(answer.body, sort_keys=True).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:  # the base's signature
        """Requests at debug level (the base writes each one to stderr)."""
        log.debug("health %s: %s", self.client_address[0], format % args)


class HealthServer:
    """Serves ``routes`` on ``host:port`` from ``start`` until ``close``."""

    def __init__(self, routes: Routes, host: str, port: int) -> None:
        self._routes = routes
        self._address = (host, port)
        self._server: _Server | None = None

    @property
    def port(self) -> int:
        """The port bound (the one asked for, or the free one chosen for port 0)."""
        assert self._server is not None, "start() first"
        return self._server.server_address[1]

    def start(self) -> None:
        try:
            server = _Server(self._address, self._routes)
        except OSError as exc:
            host, port = self._address
            raise ConfigurationError(
                f"health endpoints cannot listen on {host}:{port} ({exc.strerror or exc}): choose"
                " another --health-port / GRAPH_INGEST_HEALTH__PORT"
            ) from exc
        self._server = server
        threading.Thread(target=server.serve_forever, name="health-server", daemon=True).start()

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


@contextmanager
def serving_health(
    settings: HealthSettings, worker: str, details: ReadyDetails | None = None
) -> Iterator[tuple[LoopSubscriber, ...]]:
    """The subscribers to pass to the worker's loops: a health subscriber whose endpoints are
    served while the block runs, or none when ``settings.port`` is unset; ``details`` added to
    the readiness body."""
    if settings.port is None:
        yield ()
        return
    subscriber = HealthSubscriber(worker)
    server = HealthServer(routes(subscriber, settings, details), settings.host, settings.port)
    server.start()
    log.info(
        "health endpoints on http://%s:%d/health/{live,ready,startup}", settings.host, server.port
    )
    try:
        yield (subscriber,)
    finally:
        server.close()


__all__ = ["HealthServer", "ReadyDetails", "routes", "serving_health"]
