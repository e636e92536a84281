"""Path and query parameters the routes share: ids and text filters as PostgreSQL can hold
them (no NUL, bounded), so a malformed one is a 400 naming the parameter, never a database
error; and the schema says so exactly (schemathesis holds the routes to it)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BeforeValidator

from graph_ingest.api.errors import ApiError
from graph_ingest.domain.limits import MAX_ID_LENGTH
from graph_ingest.domain.status import StatusCode

_NO_NUL = r"^[^\x00]*$"


def path_id(description: str) -> Any:
    """A path parameter that names a stored id (an operation, a space, a document)."""
    return Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=_NO_NUL, description=description)


OperationId = Annotated[str, path_id("an operation id")]


def text_filter(description: str, *, alias: str | None = None) -> Any:
    """A query parameter that filters on a stored text (a space, a document id)."""
    return Query(
        alias=alias,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=_NO_NUL,
        description=description,
    )


Cursor = Annotated[
    str | None,
    Query(
        max_length=1024,
        pattern=_NO_NUL,
        description="the `next_cursor` of the previous page; absent for the first page",
    ),
]

MAX_AGE_S = 10 * 366 * 86400.0
"""The oldest ``older_than`` a filter takes (ten years): bounded, so it is always a time."""

OlderThan = Annotated[
    float | None,
    Query(
        ge=0,
        le=MAX_AGE_S,
        allow_inf_nan=False,
        description="only those last changed at least this many seconds ago",
    ),
]

DLQ_ID_PATTERN = r"^dlq-[0-9a-f]{24}$"

DlqId = Annotated[str, Path(pattern=DLQ_ID_PATTERN, description="a DLQ id: dlq- and 24 hex digits")]

TaskId = Annotated[
    str,
    Path(pattern=r"^task-[0-9a-f]{16}$", description="a redrive task id: task- and 16 hex digits"),
]


def _not_a_number(value: object) -> object:
    """Refuse a bare number: pydantic would read it as a Unix time, the schema says date-time."""
    if isinstance(value, str) and re.fullmatch(
        r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", value
    ):
        raise ValueError("a time with a timezone, e.g. 2026-12-01T09:30:00Z, not a number")
    return value


Moment = Annotated[datetime, BeforeValidator(_not_a_number)]
"""A time in a query parameter: ISO 8601 only (the OpenAPI format date-time)."""


def aware(moment: datetime | None, name: str) -> datetime | None:
    """``moment`` when it has a timezone (or is None); else a 400 naming parameter ``name``."""
    if moment is not None and moment.tzinfo is None:
        raise ApiError(
            f"{name} needs a timezone, e.g. 2026-12-01T09:30:00Z", code=StatusCode.INVALID_ARGUMENT
        )
    return moment


__all__ = [
    "DLQ_ID_PATTERN",
    "MAX_AGE_S",
    "Cursor",
    "DlqId",
    "Moment",
    "OlderThan",
    "OperationId",
    "TaskId",
    "aware",
    "path_id",
    "text_filter",
]
