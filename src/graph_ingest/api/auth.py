"""Who may change things: the bearer token of a mutating request, checked against every
configured token in constant time; the token's *name* is what the audit records.

No token configured refuses with 403 and says how to configure one (an API nobody configured
is read-only, never open); a missing or wrong token is 401 with ``WWW-Authenticate: Bearer``.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from graph_ingest.api.errors import ApiError
from graph_ingest.domain.status import StatusCode

_BEARER = HTTPBearer(auto_error=False, description="a token of GRAPH_INGEST_API__TOKENS")

NOT_CONFIGURED = (
    "no API token is configured, so nothing may be changed through the API: set "
    'GRAPH_INGEST_API__TOKENS to a JSON object of name -> token, e.g. {"alice": "<a long random '
    'token>"} (the name is recorded as who did it), and restart `graph-ingest serve`'
)


def token_name(tokens: Mapping[str, SecretStr], presented: str) -> str | None:
    """The name of the configured token ``presented`` is, or None. Every token is compared (in
    constant time) whether or not one matched already, so timing tells nothing of which."""
    given = presented.encode("utf-8")
    found = None
    for name, token in tokens.items():
        if hmac.compare_digest(token.get_secret_value().encode("utf-8"), given):
            found = name
    return found


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
) -> str:
    """The dependency of every mutating route: the name of the caller's token."""
    tokens: Mapping[str, SecretStr] = request.app.state.tokens
    if not tokens:
        raise ApiError(NOT_CONFIGURED, code=StatusCode.PERMISSION_DENIED)
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(
            "this endpoint changes things: send Authorization: Bearer <token>",
            code=StatusCode.UNAUTHENTICATED,
            headers=challenge,
        )
    name = token_name(tokens, credentials.credentials)
    if name is None:
        raise ApiError(
            "the bearer token is none of GRAPH_INGEST_API__TOKENS",
            code=StatusCode.UNAUTHENTICATED,
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return name


Caller = Annotated[str, Depends(require_token)]
"""A route parameter of this type requires the token and holds its name."""


__all__ = ["NOT_CONFIGURED", "Caller", "require_token", "token_name"]
