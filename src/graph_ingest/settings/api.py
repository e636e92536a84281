"""The HTTP API's settings (``GRAPH_INGEST_API__*``): where ``graph-ingest serve`` listens, and
the bearer tokens its mutating endpoints accept."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from graph_ingest.settings.section import Section

MIN_TOKEN_LENGTH = 16
"""Shorter bearer tokens are refused at start-up: a guessable token is no check at all."""


class ApiSettings(Section):
    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="the address to bind; 0.0.0.0 to serve other hosts (``serve --host``)",
    )
    port: int = Field(
        default=8080, ge=0, le=65535, description="the port to bind (``serve --port``)"
    )
    tokens: Annotated[dict[str, SecretStr], NoDecode] = Field(
        default_factory=dict,
        description="bearer tokens of the mutating endpoints, name -> token, as JSON, e.g."
        ' GRAPH_INGEST_API__TOKENS=\'{"alice": "<a long random token>"}\'; the name is recorded'
        " as who did it. None configured: every mutating endpoint answers 403",
    )
    ready_lag_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="/health/ready gives up reading the projection's lag from Kafka after this",
    )

    @field_validator("tokens", mode="before")
    @classmethod
    def _tokens_from_json(cls, value: Any) -> Any:
        """The variable's JSON text, decoded here so that a mistake in it is one clear line."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f'not a JSON object of name -> token ({exc.msg}), e.g. {{"alice": "<token>"}}'
            ) from None

    @field_validator("tokens")
    @classmethod
    def _tokens_long_enough(cls, tokens: dict[str, SecretStr]) -> dict[str, SecretStr]:
        short = sorted(n for n, t in tokens.items() if len(t.get_secret_value()) < MIN_TOKEN_LENGTH)
        if short:
            raise ValueError(
                f"the token of {', '.join(short)} is shorter than {MIN_TOKEN_LENGTH} characters:"
                " use a long random one (python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        return tokens
