"""The read service: what the CLI (``status``, ``ops list``), ``submit --wait`` and the HTTP API
ask of the read tables, answered as typed values (frozen dataclasses an API can serialize).

``wait_until_projected`` is read-your-writes: it compares the status with the sequence the write
side has committed (the store's ``OperationReader``) and waits, with a short backoff, until the
projection has seen it or the deadline passes; the answer says which (``ProjectedStatus.current``),
so a caller never shows an older answer as if it were the newest.

``list_operations`` pages newest first by (updated time, operation id) with an opaque cursor: a
keyset, so a page never repeats or skips a row however many rows change meanwhile (a row that is
updated moves to the front, and is seen again on a fresh listing, not on the next page).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Sequence
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
from graph_ingest.resilience.backoff import Backoff
from graph_ingest.store.operations import OperationReader

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


@dataclass(frozen=True, slots=True)
class ProjectedStatus:
    """An operation's status as the read table holds it, beside the sequence the write side has
    committed for it."""

    status: OperationStatus | None
    """None: the projection has not seen the operation (yet)."""
    committed_sequence: int | None
    """None: the write side has no such operation."""

    @property
    def current(self) -> bool:
        """Whether the status is the newest the write side committed (an id neither side knows
        is current too: there is nothing newer to wait for)."""
        if self.committed_sequence is None:
            return True
        return self.status is not None and self.status.sequence >= self.committed_sequence


FIRST_POLL_S = 0.05
"""``wait_until_projected`` looks again after about this long, doubling up to ``LAST_POLL_S``."""
LAST_POLL_S = 1.0


class OperationQueries:
    """Answers from the read tables of one store schema (``ReadTables``, started), and the
    write side's committed sequences (``committed``: the store's operation reader, started) to
    tell a current answer from a stale one."""

    def __init__(self, tables: ReadTables, *, committed: OperationReader) -> None:
        self._tables = tables
        self._committed = committed
        self._table = sql.SQL("{}.operation_status").format(sql.Identifier(tables.schema))
        self._columns = sql.SQL(", ").join(sql.Identifier(c) for c in STATUS_COLUMNS)

    def operation_status(self, operation_id: str) -> OperationStatus | None:
        query = sql.SQL("SELECT {} FROM {} WHERE operation_id = %(id)s").format(
            self._columns, self._table
        )
        rows = self._tables.fetch(query, {"id": operation_id})
        return status_from_row(rows[0]) if rows else None

    def projected_status(self, operation_id: str) -> ProjectedStatus:
        """The status now, and whether it is current (the write side read first: a status read
        after it is at least as new as what it committed by then)."""
        committed = self._committed.get_operation(operation_id)
        return ProjectedStatus(
            self.operation_status(operation_id), committed.sequence if committed else None
        )

    def wait_until_projected(self, operation_id: str, timeout_s: float) -> ProjectedStatus:
        """Read-your-writes: the status once the projection has seen the sequence the write side
        committed for ``operation_id`` (looked up afresh each time: it may move on meanwhile), or
        when ``timeout_s`` has passed, whatever it is then (``current`` False: stale)."""
        deadline = time.monotonic() + timeout_s
        backoff = Backoff(FIRST_POLL_S, LAST_POLL_S)
        while True:
            seen = self.projected_status(operation_id)
            left = deadline - time.monotonic()
            if seen.current or left <= 0:
                return seen
            time.sleep(min(backoff.failed(), left))

    def wait_until_all_projected(
        self, operation_ids: Sequence[str], timeout_s: float
    ) -> dict[str, ProjectedStatus]:
        """``wait_until_projected`` for each of ``operation_ids``, within one deadline."""
        deadline = time.monotonic() + timeout_s
        return {
            operation_id: self.wait_until_projected(
                operation_id, max(deadline - time.monotonic(), 0.0)
            )
            for operation_id in operation_ids
        }

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
    "ProjectedStatus",
    "decode_cursor",
    "encode_cursor",
    "encode_keyset",
]
