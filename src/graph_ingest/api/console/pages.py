"""How a console page is answered: the templates (autoescaped, strict: a name a page forgets is
an error in the tests, not a blank), the context every page shares, and a failure as a page
with its code, error id and trace id instead of a stack trace."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from graph_ingest.api.console.tokens import acting_as
from graph_ingest.api.errors import ErrorResponse, error_response
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.resilience.classify import error_info

PACKAGE = "graph_ingest.api.console"
STATIC = files(PACKAGE) / "static"


def _when(moment: datetime | None) -> str:
    """An instant in UTC to the millisecond: operators compare them across hosts."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader(PACKAGE, "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["when"] = _when


def render(
    request: Request,
    template: str,
    *,
    title: str,
    section: str,
    live: int | None = None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """``template`` with what every page shows: the navigation, who acts, a notice passed on by
    the page that redirected here, and (``live``) the refresh period in seconds."""

    def url(route: str, /, **params: str) -> str:
        return str(request.app.url_path_for(route, **params))

    page = _TEMPLATES.get_template(template).render(
        request=request,
        url=url,
        title=title,
        section=section,
        live=live,
        token_name=acting_as(request),
        notice=request.query_params.get("notice"),
        problem=context.pop("problem", None),
        **context,
    )
    return HTMLResponse(page, status_code=status_code)


def failure_page(request: Request, exc: GraphIngestError, *, section: str) -> HTMLResponse:
    """A failure as a page: its code and message, and the error and trace ids it is logged
    under (an unreachable PostgreSQL is a 503 page, a bad filter a 400 one). The API's own
    ``error_response`` logs it and picks the status, so both surfaces report a failure alike."""
    info = error_info(exc)
    answer = error_response(request, info.code, info.message)
    error = ErrorResponse.model_validate_json(bytes(answer.body)).error
    return render(
        request,
        "error.html",
        title=f"{error.code}",
        section=section,
        status_code=answer.status_code,
        problem=f"{error.message} (error {error.error_id}, trace {error.trace_id})",
    )


__all__ = ["STATIC", "failure_page", "render"]
