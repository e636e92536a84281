"""The console's pages under ``/ui``: operations (list and timeline), projections, the token
form and the static files; the DLQ pages are in ``dlq_pages``. Every page is server-rendered
from the same services the JSON API calls (``api.services``), and none is in the OpenAPI
document: the API's contract is its JSON routes."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from graph_ingest.api.auth import NOT_CONFIGURED
from graph_ingest.api.console import dlq_pages, task_pages, worker_pages
from graph_ingest.api.console.pages import STATIC, failure_page, render
from graph_ingest.api.console.tokens import check_token, forget_token, form_fields, keep_token
from graph_ingest.api.console.views import (
    operation_filter,
    timeline,
)
from graph_ingest.api.errors import ApiError, http_status_of
from graph_ingest.api.services import services_of
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.failure_view import AttemptView
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.lag_reader import operations_lag
from graph_ingest.projections.operation_views import MAX_PARKED_CHAIN, parked_chain
from graph_ingest.projections.queries import InvalidQuery
from graph_ingest.schemas.codec import decode_dlq_envelope

router = APIRouter(include_in_schema=False)
router.include_router(task_pages.router)  # before dlq_pages: /ui/dlq/tasks is no DLQ id
router.include_router(dlq_pages.router)
router.include_router(worker_pages.router)

OPERATIONS_PAGE = 50
LIVE_S = 3
STATIC_FILES = {"console.css": "text/css", "console.js": "text/javascript"}


@router.get("/ui", name="console_operations")
def operations(request: Request) -> HTMLResponse:
    params = request.query_params
    shown: dict[str, Any] = {
        "title": "Operations",
        "section": "operations",
        "live": LIVE_S,
        "stages": list(Stage),
        "codes": list(StatusCode),
        "filters": dict(params),
    }
    try:
        where = operation_filter(params)
        page = services_of(request).queries.list_operations(
            where, limit=OPERATIONS_PAGE, cursor=params.get("cursor") or None
        )
    except InvalidQuery as exc:
        return render(request, "operations.html", **shown, page=None, problem=exc.message,
                      status_code=400)  # fmt: skip
    except GraphIngestError as exc:
        return failure_page(request, exc, section="operations")
    following = urlencode({**params, "cursor": page.next_cursor or ""})
    return render(request, "operations.html", **shown, page=page, next_query=following)


@router.get("/ui/operations/{operation_id}", name="console_operation")
def operation(request: Request, operation_id: str) -> HTMLResponse:
    """One operation's timeline: every step with its time, and, once it is in the DLQ, its
    entry's failed attempts with their trace ids and what it was parked behind."""
    services = services_of(request)
    try:
        status = services.queries.operation_status(operation_id)
        entry = services.store.get_dlq_entry(status.dlq_id) if status and status.dlq_id else None
        envelope = decode_dlq_envelope(entry.envelope) if entry else None
        behind = status.parked_behind if status else None
        chain = parked_chain(behind or (entry.parked_behind if entry else None),
                             services.queries.operation_status)  # fmt: skip
    except GraphIngestError as exc:
        return failure_page(request, exc, section="operations")
    return render(
        request,
        "operation.html",
        title=f"Operation {operation_id}",
        section="operations",
        live=LIVE_S,
        status_code=200 if status else 404,
        operation_id=operation_id,
        op=status,
        entry=entry,
        steps=timeline(status.transitions) if status else [],
        chain=chain,
        chain_limit=MAX_PARKED_CHAIN,
        attempts=[AttemptView.of_record(r) for r in envelope.attempts] if envelope else [],
        folded=envelope.folded_attempts if envelope else 0,
    )


@router.get("/ui/projections", name="console_projections")
def projections(request: Request) -> HTMLResponse:
    services = services_of(request)
    try:
        lag = operations_lag(services.settings, services.tables, timeout_s=10)
    except GraphIngestError as exc:
        return failure_page(request, exc, section="projections")
    return render(
        request, "projections.html", title="Projections", section="projections", live=5, lag=[lag]
    )


def _local(target: str | None) -> str:
    """Where to go after the token form: a console path only (never another site)."""
    if target and target.startswith("/ui") and not target.startswith("//"):
        return target
    return "/ui"


@router.get("/ui/token", name="console_token_form")
def token_form(request: Request) -> HTMLResponse:
    return render(
        request,
        "token.html",
        title="Your API token",
        section="token",
        next=_local(request.query_params.get("next")),
        problem=None if request.app.state.tokens else NOT_CONFIGURED,
    )


@router.post("/ui/token", name="console_token")
async def token(request: Request) -> Response:
    """Keep the token in an HttpOnly cookie when it is a configured one, or forget it."""
    fields = await form_fields(request)
    target = _local(fields.get("next"))
    if fields.get("forget"):
        response: Response = RedirectResponse(target, status_code=303)
        forget_token(response)
        return response
    presented = fields.get("token", "").strip()
    try:
        check_token(request, presented or None)
    except ApiError as exc:
        return render(request, "token.html", title="Your API token", section="token",
                      next=target, problem=exc.message, status_code=http_status_of(exc.code))  # fmt: skip
    response = RedirectResponse(target, status_code=303)
    keep_token(response, request, presented)
    return response


@router.get("/ui/static/{name}", name="console_static")
def static(name: str) -> Response:
    """The stylesheet and the script, shipped as package data (no build step)."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return Response(f"no static file {name!r}", status_code=404, media_type="text/plain")
    return Response((STATIC / name).read_bytes(), media_type=media_type)


__all__ = ["router"]
