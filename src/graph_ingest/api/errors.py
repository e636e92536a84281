"""Every error the API answers, in one JSON shape with a stable code, and the handlers that make
it so: ``{"error": {"code", "message", "error_id", "trace_id"}}``.

``code`` is a :class:`~graph_ingest.domain.status.StatusCode` name (the vocabulary of the CLI's
``--json`` errors); ``error_id`` names this one failure (it is in the server's log line too);
``trace_id`` is the request's W3C trace id when it sent a valid ``traceparent``, else a new one.

============================================  ======  ===================
what went wrong                               status  code
============================================  ======  ===================
a body the schema rejects                     422     INVALID_ARGUMENT
a change without the reason it needs          422     INVALID_ARGUMENT
an id, cursor or filter that is malformed     400     INVALID_ARGUMENT
no such resource (or route)                   404     NOT_FOUND
no token, or a wrong one                      401     UNAUTHENTICATED
no token configured at all                    403     PERMISSION_DENIED
refused as things stand (purge, replay)       409     FAILED_PRECONDITION
a backing service is down                     503     UNAVAILABLE
anything else (a bug: logged with its id)     500     INTERNAL
============================================  ======  ===================
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from graph_ingest.dlq.audit import MissingReason
from graph_ingest.domain.error_detail import new_error_id
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import InvalidTraceparent, new_trace_id, parse_traceparent

log = logging.getLogger(__name__)

_HTTP_STATUS = {
    StatusCode.INVALID_ARGUMENT: HTTPStatus.BAD_REQUEST,
    StatusCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
    StatusCode.UNAUTHENTICATED: HTTPStatus.UNAUTHORIZED,
    StatusCode.PERMISSION_DENIED: HTTPStatus.FORBIDDEN,
    StatusCode.FAILED_PRECONDITION: HTTPStatus.CONFLICT,
    StatusCode.ALREADY_EXISTS: HTTPStatus.CONFLICT,
    StatusCode.ABORTED: HTTPStatus.CONFLICT,
    StatusCode.DATA_LOSS: HTTPStatus.UNPROCESSABLE_ENTITY,
    StatusCode.RESOURCE_EXHAUSTED: HTTPStatus.TOO_MANY_REQUESTS,
    StatusCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    StatusCode.DEADLINE_EXCEEDED: HTTPStatus.GATEWAY_TIMEOUT,
}
"""The HTTP status of each status code; the others (INTERNAL) answer 500."""

_CODE_OF_HTTP = {
    HTTPStatus.NOT_FOUND: StatusCode.NOT_FOUND,
    HTTPStatus.METHOD_NOT_ALLOWED: StatusCode.INVALID_ARGUMENT,
    HTTPStatus.UNAUTHORIZED: StatusCode.UNAUTHENTICATED,
    HTTPStatus.FORBIDDEN: StatusCode.PERMISSION_DENIED,
}
"""The status code of an HTTP error raised by the framework itself (an unknown route)."""


class ErrorBody(BaseModel):
    code: StatusCode
    message: str
    error_id: str
    trace_id: str


class ErrorResponse(BaseModel):
    """Every error the API answers (the OpenAPI document names it on each route)."""

    error: ErrorBody


class ApiError(GraphIngestError):
    """An error a route raises on purpose; its code decides the HTTP status."""

    def __init__(
        self, message: str, *, code: StatusCode, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.headers = headers or {}


def http_status_of(code: StatusCode) -> int:
    return int(_HTTP_STATUS.get(code, HTTPStatus.INTERNAL_SERVER_ERROR))


def trace_id_of(request: Request) -> str:
    """The request's trace id (its ``traceparent``), or a new one when it sent none valid."""
    value = request.headers.get("traceparent")
    if value is not None:
        try:
            return parse_traceparent(value).trace_id
        except InvalidTraceparent:
            pass  # the specification says to start a new trace
    return new_trace_id()


def error_response(
    request: Request,
    code: StatusCode,
    message: str,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    exc_info: BaseException | None = None,
) -> JSONResponse:
    """The error as the API answers it, logged with its error id (and ``exc_info``'s traceback)."""
    body = ErrorBody(
        code=code, message=message, error_id=new_error_id(), trace_id=trace_id_of(request)
    )
    status = http_status_of(code) if status is None else status
    log.log(
        logging.ERROR if status >= 500 else logging.INFO,
        "%s %s: %d %s %s (error %s, trace %s)",
        request.method,
        request.url.path,
        status,
        code,
        message,
        body.error_id,
        body.trace_id,
        exc_info=exc_info,
    )
    return JSONResponse(
        ErrorResponse(error=body).model_dump(mode="json"), status_code=status, headers=headers
    )


async def _graph_ingest_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GraphIngestError)
    headers = exc.headers if isinstance(exc, ApiError) else None
    return error_response(request, exc.code, exc.message, headers=headers)


async def _missing_reason(request: Request, exc: Exception) -> JSONResponse:
    """A change asked without the reason the audit needs: the request is incomplete (422)."""
    assert isinstance(exc, MissingReason)
    return error_response(request, exc.code, exc.message, status=HTTPStatus.UNPROCESSABLE_ENTITY)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """A body the schema rejects is 422; an id or a filter (path, query) is 400: the request
    names something that cannot exist."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in errors
    )
    in_body = any(error["loc"][:1] == ("body",) for error in errors)
    return error_response(
        request,
        StatusCode.INVALID_ARGUMENT,
        problems or "invalid request",
        status=HTTPStatus.UNPROCESSABLE_ENTITY if in_body else HTTPStatus.BAD_REQUEST,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _CODE_OF_HTTP.get(HTTPStatus(exc.status_code), StatusCode.INTERNAL)
    return error_response(
        request, code, str(exc.detail), status=exc.status_code, headers=dict(exc.headers or {})
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """A bug, never bad input: answered as JSON with an error id, logged with its traceback."""
    message = "internal error: the server's log has it under this error id"
    return error_response(request, StatusCode.INTERNAL, message, exc_info=exc)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(GraphIngestError, _graph_ingest_error)
    app.add_exception_handler(MissingReason, _missing_reason)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    "4XX": {"model": ErrorResponse, "description": "bad input, unknown, or refused"},
    "5XX": {"model": ErrorResponse, "description": "a backing service is down, or a bug"},
}
"""The error responses every route documents."""


__all__ = [
    "ERROR_RESPONSES",
    "ApiError",
    "ErrorBody",
    "ErrorResponse",
    "error_response",
    "http_status_of",
    "install_error_handlers",
    "trace_id_of",
]
