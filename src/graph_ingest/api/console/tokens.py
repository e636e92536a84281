"""The operator's token in the console: a small form puts it in an HttpOnly cookie, and each
action checks it with the API's own ``require_token`` (one auth scheme: the same tokens, the
same constant-time comparison, the same refusals and messages).

The cookie is ``SameSite=Strict`` and scoped to ``/ui``: another site cannot make the browser
send it with a forged form, and the API's JSON routes never see it (they take the bearer
header only).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials

from graph_ingest.api.auth import require_token, token_name

COOKIE = "graph_ingest_token"
COOKIE_PATH = "/ui"
COOKIE_MAX_AGE_S = 12 * 3600
"""A shift: the token is given again the next day."""


def acting_as(request: Request) -> str | None:
    """The name of the token the browser holds, when it is a configured one (for display)."""
    token = request.cookies.get(COOKIE)
    return token_name(request.app.state.tokens, token) if token else None


def check_token(request: Request, token: str | None) -> str:
    """The name of ``token``, checked as the API checks a bearer token: ApiError (401, or 403
    when no token is configured) with the API's message otherwise."""
    credentials = (
        HTTPAuthorizationCredentials(scheme="Bearer", credentials=token) if token else None
    )
    return require_token(request, credentials)


def require_cookie_token(request: Request) -> str:
    """The name of the token the browser holds, checked (``check_token``)."""
    return check_token(request, request.cookies.get(COOKIE))


def keep_token(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=COOKIE_MAX_AGE_S,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def forget_token(response: Response) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


async def form_fields(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, first value of each field (the console's
    forms are that simple, so no multipart parser is needed)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {name: values[0] for name, values in parse_qs(body).items()}


__all__ = [
    "COOKIE",
    "acting_as",
    "check_token",
    "forget_token",
    "form_fields",
    "keep_token",
    "require_cookie_token",
]
