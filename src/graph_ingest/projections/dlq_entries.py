"""The read service of DLQ entries (``<schema>_read.dlq_entries``): what the API and the console
ask of them, as typed values.

``list_entries`` pages oldest first (the order of ``dlq list``: the longest waiting first) by
(dead-lettered time, DLQ id) with an opaque cursor: a keyset, so a page never repeats or skips a
row however many rows change meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.dlq_rows import DLQ_TABLE, DlqReadEntry, entry_from_row
from graph_ingest.projections.queries import MAX_LIMIT, InvalidQuery, decode_cursor, encode_keyset
from graph_ingest.projections.tables import ReadTables


@dataclass(frozen=True, slots=True)
class DlqFilter:
    """Which DLQ entries to list; every criterion given must hold."""

    status: DlqStatus | None = None
    code: StatusCode | None = None
    error_class: str | None = None
    space: str | None = None
    since: datetime | None = None
    """Only entries dead-lettered at or after this instant."""
    until: datetime | None = None
    """Only entries dead-lettered before this instant."""


@dataclass(frozen=True, slots=True)
class DlqEntryPage:
    entries: tuple[DlqReadEntry, ...]
    next_cursor: str | None
    """Pass it back for the next page; None on the last page."""


class DlqEntryQueries:
    """Answers from the DLQ entries of one read schema (``ReadTables``, started)."""

    def __init__(self, tables: ReadTables) -> None:
        self._tables = tables

    def entry(self, dlq_id: str) -> DlqReadEntry | None:
        rows = self._tables.fetch(
            DLQ_TABLE.select(self._tables.schema, "dlq_id = %(id)s"), {"id": dlq_id}
        )
        return entry_from_row(rows[0]) if rows else None

    def list_entries(
        self, where: DlqFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> DlqEntryPage:
        """One page of the entries ``where`` selects (all when None), oldest first; its
        ``next_cursor`` continues after its last row."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
        conditions, params = _conditions(where or DlqFilter())
        if cursor is not None:
            params["after_at"], params["after_id"] = decode_cursor(cursor)
            conditions.append("(dead_lettered_at, dlq_id) > (%(after_at)s, %(after_id)s)")
        condition = " AND ".join(conditions) or "TRUE"
        query = DLQ_TABLE.select(
            self._tables.schema, f"{condition} ORDER BY dead_lettered_at, dlq_id LIMIT %(fetch)s"
        )
        rows = self._tables.fetch(query, {**params, "fetch": limit + 1})
        page = tuple(entry_from_row(row) for row in rows[:limit])
        more = len(rows) > limit
        last = page[-1] if more else None
        return DlqEntryPage(
            page, encode_keyset(last.dead_lettered_at, last.dlq_id) if last else None
        )


def _conditions(where: DlqFilter) -> tuple[list[str], dict[str, object]]:
    """The filter as SQL conditions (fixed text, values as parameters)."""
    if where.since and where.until and where.since >= where.until:
        raise InvalidQuery(f"the range is empty: since {where.since} is not before {where.until}")
    criteria: dict[str, tuple[str, object]] = {
        "status": ("status = %(status)s", where.status.value if where.status else None),
        "code": ("code = %(code)s", where.code.value if where.code else None),
        "error_class": ("error_class = %(error_class)s", where.error_class),
        "space": ("space = %(space)s", where.space),
        "since": ("dead_lettered_at >= %(since)s", where.since),
        "until": ("dead_lettered_at < %(until)s", where.until),
    }
    given = {name: (text, value) for name, (text, value) in criteria.items() if value is not None}
    return [text for text, _ in given.values()], {name: value for name, (_, value) in given.items()}


__all__ = ["DlqEntryPage", "DlqEntryQueries", "DlqFilter"]
