"""An OpenAI-compatible chat-completions client: one POST, bounded, retried, errors translated once.

Status mapping: 429 → RESOURCE_EXHAUSTED; 5xx, connection errors and a 2xx body that is not a
chat completion → UNAVAILABLE; timeouts → DEADLINE_EXCEEDED. These are retried with backoff
(honouring Retry-After, capped by ``max_backoff_s``) up to ``max_attempts`` tries, then raised as
ExtractionFailed with that code and the delay the endpoint asked for. 400 (and any other 4xx) →
INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 403 → PERMISSION_DENIED, 404 → NOT_FOUND: raised at once.

The API key goes in the Authorization header and nowhere else. Nothing a response carries is
logged or put in an error beyond its status, its size and an identifier-like error code.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.identifiers import is_identifier
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed, PlanningError
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.settings.llm import LlmSettings

log = logging.getLogger(__name__)

_PERMANENT = {
    400: StatusCode.INVALID_ARGUMENT,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.NOT_FOUND,
}
# Of an error response, only this much is read, to find its error code.
_MAX_ERROR_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class ChatReply:
    content: str
    finish_reason: str | None


class UnusableReply(PlanningError):
    """A completion came back but holds nothing to read (too large, no content). The request's
    chunks get an issue; retrying the same request would only pay for the same answer."""


class _Transient(Exception):
    def __init__(self, message: str, code: StatusCode, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after_s = retry_after_s


class ChatClient:
    """Posts to ``<base_url>/chat/completions``. The HTTP client is created on first use.

    ``sleep`` waits between tries and ``clock`` (seconds since the epoch) reads an HTTP-date
    Retry-After: both injectable, so tests need not wait."""

    def __init__(
        self,
        settings: LlmSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if settings.base_url is None:
            raise ConfigurationError("GRAPH_INGEST_LLM__BASE_URL is not set (the llm extractor)")
        url = httpx.URL(settings.base_url.rstrip("/") + "/chat/completions")
        if url.scheme not in ("http", "https") or not url.host:
            raise ConfigurationError(
                "GRAPH_INGEST_LLM__BASE_URL must be an http(s) URL with a host,"
                f" not one with scheme {url.scheme!r} and host {url.host!r}"
            )
        if url.userinfo:
            # A secret in a setting that is shown in full: keys belong in API_KEY (a SecretStr).
            raise ConfigurationError(
                "GRAPH_INGEST_LLM__BASE_URL must not carry credentials; set"
                " GRAPH_INGEST_LLM__API_KEY instead"
            )
        self._settings = settings
        self._url = url
        # Where errors and logs say the request went: no query.
        self.endpoint = f"{url.scheme}://{url.netloc.decode()}{url.path}"
        self._sleep = sleep
        self._clock = clock
        self._http: httpx.Client | None = None

    def complete(self, body: dict[str, Any]) -> ChatReply:
        attempts = self._settings.max_attempts
        backoff = Backoff(self._settings.initial_backoff_s, self._settings.max_backoff_s)
        while True:
            try:
                return self._post(body)
            except _Transient as failure:
                delay = backoff.failed()
                if backoff.failures >= attempts:
                    raise ExtractionFailed(
                        f"{self.endpoint}: {failure} (after {attempts} attempts)",
                        code=failure.code,
                        retry_after_s=failure.retry_after_s,
                    ) from None
                if failure.retry_after_s is not None:
                    delay = failure.retry_after_s
                log.warning(
                    "llm %s: %s (%s, attempt %d of %d); retrying in %.1fs",
                    self.endpoint,
                    failure,
                    failure.code,
                    backoff.failures,
                    attempts,
                    delay,
                )
                self._sleep(delay)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _client(self) -> httpx.Client:
        if self._http is None:
            settings = self._settings
            headers = {"Accept": "application/json"}
            if settings.api_key is not None:
                headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
            self._http = httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
                follow_redirects=False,
            )
        return self._http

    def _post(self, body: dict[str, Any]) -> ChatReply:
        try:
            with self._client().stream("POST", self._url, json=body) as response:
                if response.status_code >= 300:
                    self._refuse(response)
                data = self._read(response, self._settings.max_response_bytes)
        except httpx.TimeoutException as error:
            raise _Transient(
                f"timed out ({type(error).__name__})", StatusCode.DEADLINE_EXCEEDED
            ) from None
        except httpx.HTTPError as error:
            raise _Transient(f"{type(error).__name__}: {error}", StatusCode.UNAVAILABLE) from None
        return _reply(data)

    def _refuse(self, response: httpx.Response) -> None:
        status = response.status_code
        if status == 429 or status >= 500:
            retry_after = self._retry_after_s(response.headers.get("Retry-After"))
            code = StatusCode.RESOURCE_EXHAUSTED if status == 429 else StatusCode.UNAVAILABLE
            raise _Transient(f"HTTP {status}", code, retry_after)
        detail = _error_code(self._read(response, _MAX_ERROR_BODY_BYTES, cut=True))
        raise ExtractionFailed(
            f"{self.endpoint}: HTTP {status}{detail}",
            code=_PERMANENT.get(status, StatusCode.INVALID_ARGUMENT),
        )

    def _read(self, response: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
        data = bytearray()
        for part in response.iter_bytes():
            data += part
            if len(data) > limit:
                if cut:
                    return bytes(data[:limit])
                raise UnusableReply(f"the response exceeds {limit} bytes; not read further")
        return bytes(data)

    def _retry_after_s(self, value: str | None) -> float | None:
        """Retry-After in seconds (delay-seconds or an HTTP date), capped by max_backoff_s."""
        if value is None:
            return None
        try:
            delay = float(value)
        except ValueError:
            try:
                delay = parsedate_to_datetime(value).timestamp() - self._clock()
            except (TypeError, ValueError):
                return None
        return min(max(delay, 0.0), self._settings.max_backoff_s)


def _reply(data: bytes) -> ChatReply:
    try:
        choice = json.loads(data)["choices"][0]
        content, finish_reason = choice["message"]["content"], choice.get("finish_reason")
    except (ValueError, LookupError, TypeError, AttributeError):
        raise _Transient(
            f"a {len(data)}-byte 2xx response that is not a chat completion",
            StatusCode.UNAVAILABLE,
        ) from None
    finish_reason = _identifier_or_none(finish_reason)
    if not isinstance(content, str):
        raise UnusableReply(f"the model returned no text (finish_reason {finish_reason})")
    return ChatReply(content, finish_reason)


def _error_code(data: bytes) -> str:
    """``: <code>`` of an OpenAI-style error body ({"error": {"code": ..., "type": ...}}) when it
    is a short identifier (``invalid_api_key``, ``model_not_found``); its message is not shown
    (it may echo the request)."""
    try:
        error = json.loads(data)["error"]
        code = _identifier_or_none(error.get("code") or error.get("type"))
    except (ValueError, LookupError, TypeError, AttributeError):
        return ""
    return "" if code is None else f": {code}"


def _identifier_or_none(value: object) -> str | None:
    """A value a response carries, shown only if it is an identifier (never free text)."""
    return value if isinstance(value, str) and is_identifier(value) else None
