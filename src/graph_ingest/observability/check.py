"""Asking a health endpoint from a script (``graph-ingest check``): one GET, its status and its
JSON body, or a clear error when nothing answers there."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.observability.probes import ProbeAnswer

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Asks the URL itself: an HTTP proxy from the environment must not answer for the worker."""


class HealthUnreachable(GraphIngestError):
    """Nothing answers at the health URL, or what answers is no health endpoint."""

    code = StatusCode.UNAVAILABLE


def ask(base_url: str, probe: str, *, timeout_s: float) -> ProbeAnswer:
    """GET ``<base_url>/health/<probe>``: its status and JSON body, whatever the status."""
    url = f"{base_url.rstrip('/')}/health/{probe}"
    if not url.startswith(("http://", "https://")):
        raise HealthUnreachable(f"{base_url!r} is no http:// or https:// URL")
    try:
        with _DIRECT.open(url, timeout=timeout_s) as response:
            return ProbeAnswer(response.status, _json(url, response.read()))
    except urllib.error.HTTPError as exc:
        return ProbeAnswer(exc.code, _json(url, exc.read()))
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HealthUnreachable(f"nothing answers at {url}: {reason}") from exc


def _json(url: str, raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise HealthUnreachable(f"{url} answered, but not with JSON: {raw[:80]!r}") from exc
    if not isinstance(body, dict):
        raise HealthUnreachable(f"{url} answered JSON that is no health report: {raw[:80]!r}")
    return body


__all__ = ["HealthUnreachable", "ask"]
