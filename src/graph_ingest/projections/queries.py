"""The read service: what the CLI (``status``, ``ops list``), ``submit --wait`` and the HTTP API
ask of the read tables, answered as typed values (frozen dataclasses an API can serialize).

``list_operations`` pages newest first by (updated time, operation id) with an opaque cursor: a
keyset, so a page never repeats or skips a row however many rows change meanwhile (a row that is
updated moves to the front, and is seen again on a fresh listing, not on the next page).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

import orjson
from psycopg import sql

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus
from graph_ingest.projections.rows import STATUS_COLUMNS, status_from_row
from graph_ingest.projections.tables import ReadTables

MAX_LIMIT = 1000


class InvalidQuery(GraphIngestError):
    """A filter, limit or cursor the read service cannot use (an API answers 400)."""

    code = StatusCode.INVALID_ARGUMENT


@dataclass(frozen=True, slots=True)
class OperationFilter:
    """Which operations to list; every criterion given must hold."""

    stage: Stage | None = None
    space: str | None = None
    document: str | None = None
    error_code: StatusCode | None = None
    older_than: datetime | None = None
    """Only operations last updated before this instant (stuck ones, for an operator)."""


@dataclass(frozen=True, slots=True)
class OperationPage:
    operations: tuple[OperationStatus, ...]
    next_cursor: str | None
    """Pass it back for the next page; None on the last page."""


class OperationQueries:
    """Answers from the read tables of one store schema (``ReadTables``, started)."""

    def __init__(self, tables: ReadTables) -> None:
        self._tables = tables
        self._table = sql.SQL("{}.operation_status").format(sql.Identifier(tables.schema))
        self._columns = sql.SQL(", ").join(sql.Identifier(c) for c in STATUS_COLUMNS)

    def operation_status(self, operation_id: str) -> OperationStatus | None:
        query = sql.SQL("SELECT {} FROM {} WHERE operation_id = %(id)s").format(
            self._columns, self._table
        )
        rows = self._tables.fetch(query, {"id": operation_id})
        return status_from_row(rows[0]) if rows else None

    def list_operations(
        self, where: OperationFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> OperationPage:
        """One page of the operations ``where`` selects (all when None), newest first; its
        ``next_cursor`` continues after its last row."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
        conditions, params = _conditions(where or OperationFilter())
        if cursor is not None:
            params["after_at"], params["after_id"] = decode_cursor(cursor)
            conditions.append("(updated_at, operation_id) < (%(after_at)s, %(after_id)s)")
        query = sql.SQL(
            "SELECT {columns} FROM {table} WHERE {where} "
            "ORDER BY updated_at DESC, operation_id DESC LIMIT %(fetch)s"
        ).format(
            columns=self._columns,
            table=self._table,
            where=sql.SQL(" AND ".join(conditions) or "TRUE"),
        )
        rows = self._tables.fetch(query, {**params, "fetch": limit + 1})
        page = tuple(status_from_row(row) for row in rows[:limit])
        more = len(rows) > limit
        return OperationPage(page, encode_cursor(page[-1]) if more else None)


def _conditions(where: OperationFilter) -> tuple[list[str], dict[str, object]]:
    """The filter as SQL conditions (fixed text, values as parameters)."""
    criteria: dict[str, tuple[str, object]] = {
        "stage": ("stage = %(stage)s", where.stage.value if where.stage else None),
        "space": ("space = %(space)s", where.space),
        "document": ("document_id = %(document)s", where.document),
        "error_code": (
            "error_code = %(error_code)s",
            where.error_code.value if where.error_code else None,
        ),
        "older_than": ("updated_at < %(older_than)s", where.older_than),
    }
    given = {name: (text, value) for name, (text, value) in criteria.items() if value is not None}
    return [text for text, _ in given.values()], {name: value for name, (_, value) in given.items()}


def encode_cursor(last: OperationStatus) -> str:
    """Where the next page starts: after ``last`` (its updated time and id), opaque."""
    return encode_keyset(last.updated_at, last.operation_id)


def encode_keyset(at: datetime, key: str) -> str:
    """A keyset position (a time, an id) as an opaque cursor that ``decode_cursor`` reads."""
    raw = orjson.dumps([at.isoformat(), key])
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, operation_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        moment = datetime.fromisoformat(at)
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError) as exc:
        raise InvalidQuery(f"not a cursor this service gave out: {cursor[:80]!r}") from exc
    if moment.tzinfo is None or not isinstance(operation_id, str):
        raise InvalidQuery(f"not a cursor this service gave out: {cursor[:80]!r}")
    return moment, operation_id


__all__ = [
    "MAX_LIMIT",
    "InvalidQuery",
    "OperationFilter",
    "OperationPage",
    "OperationQueries",
    "decode_cursor",
    "encode_cursor",
    "encode_keyset",
]
