"""The DLQ index port on PostgreSQL: ``dlq_entries`` rows, filtered and paged oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.dlq_index import DlqCount, DlqEntry, DlqQuery, DlqStats
from graph_ingest.store.postgres.params import Columns, Row, columns
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated

DLQ_ENTRY_COLUMNS = """
    dlq_id, status, operation_id, fingerprint, space, document_id, code, error_class, message,
    parked_behind, original_topic, original_partition, original_offset, attempts,
    dead_lettered_at, envelope"""


DLQ_ENTRIES = (
    "SELECT"
    + DLQ_ENTRY_COLUMNS
    + """
FROM dlq_entries
WHERE dlq_id = ANY(%(dlq_id)b::text[])
ORDER BY dlq_id
FOR UPDATE
"""
)


PUT_DLQ_ENTRIES = (
    "INSERT INTO dlq_entries ("
    + DLQ_ENTRY_COLUMNS
    + """)
SELECT *
FROM unnest(
    %(dlq_id)b::text[], %(status)b::text[], %(operation_id)b::text[], %(fingerprint)b::text[],
    %(space)b::text[], %(document_id)b::text[], %(code)b::text[], %(error_class)b::text[],
    %(message)b::text[], %(parked_behind)b::text[], %(original_topic)b::text[],
    %(original_partition)b::int[], %(original_offset)b::bigint[], %(attempts)b::int[],
    %(dead_lettered_at)b::timestamptz[], %(envelope)b::bytea[]
)
ON CONFLICT (dlq_id) DO UPDATE SET
"""
    + ",\n".join(
        f"    {column.strip()} = EXCLUDED.{column.strip()}"
        for column in DLQ_ENTRY_COLUMNS.split(",")[1:]
    )
)


# `dlq reindex`: writers of the index (routing, replay, purge) wait while the rows are replaced.
LOCK_DLQ_INDEX = "LOCK TABLE dlq_entries IN EXCLUSIVE MODE"


DELETE_DLQ_ENTRIES = "DELETE FROM dlq_entries"


# A NULL filter matches everything; the keyset cursor (after_at, after_id) pages oldest first.
_DLQ_FILTER = """
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(code)s::text IS NULL OR code = %(code)s::text)
  AND (%(error_class)s::text IS NULL OR error_class = %(error_class)s::text)
  AND (%(space)s::text IS NULL OR space = %(space)s::text)
  AND (%(document_id)s::text IS NULL OR document_id = %(document_id)s::text)
  AND (%(older_than_s)s::float8 IS NULL
       OR dead_lettered_at <= now() - make_interval(secs => %(older_than_s)s::float8))
  AND (%(after_at)s::timestamptz IS NULL
       OR (dead_lettered_at, dlq_id) > (%(after_at)s::timestamptz, %(after_id)s::text))
"""


LIST_DLQ_ENTRIES = (
    "SELECT"
    + DLQ_ENTRY_COLUMNS
    + "\nFROM dlq_entries"
    + _DLQ_FILTER
    + "ORDER BY dead_lettered_at, dlq_id\nLIMIT %(limit)s\n"
)


COUNT_DLQ_ENTRIES = "SELECT count(*) AS entries FROM dlq_entries" + _DLQ_FILTER


GET_DLQ_ENTRY = "SELECT" + DLQ_ENTRY_COLUMNS + "\nFROM dlq_entries WHERE dlq_id = %s"


DLQ_STATS = """
SELECT code, status, count(*) AS entries,
       EXTRACT(EPOCH FROM now() - min(dead_lettered_at))::float8 AS oldest_age_s
FROM dlq_entries
GROUP BY code, status
ORDER BY code, status
"""


class PostgresDlqIndexWriter(TransactionSession):
    """``DlqIndexWriter`` in a unit of work."""

    @translated
    def dlq_entries(self, dlq_ids: Sequence[str]) -> dict[str, DlqEntry]:
        if not dlq_ids:
            return {}
        found = self._fetch(DLQ_ENTRIES, {"dlq_id": sorted(set(dlq_ids))})
        return {row["dlq_id"]: dlq_entry_from_row(row) for row in found}

    @translated
    def put_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        if entries:
            self._execute(PUT_DLQ_ENTRIES, dlq_entry_columns(entries))

    @translated
    def lock_dlq_index(self) -> None:
        self._execute(LOCK_DLQ_INDEX, {})

    @translated
    def replace_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        with self._savepoint():
            self._execute(DELETE_DLQ_ENTRIES, {})
            self.put_dlq_entries(entries)


class PostgresDlqIndexReader(PooledReads):
    """``DlqIndexReader``: each call its own short read."""

    @translated
    def list_dlq_entries(self, query: DlqQuery) -> list[DlqEntry]:
        found = self._fetch_all(LIST_DLQ_ENTRIES, dlq_query_params(query))
        return [dlq_entry_from_row(row) for row in found]

    @translated
    def count_dlq_entries(self, query: DlqQuery) -> int:
        row = self._fetch_one(COUNT_DLQ_ENTRIES, dlq_query_params(query))
        return 0 if row is None else int(row["entries"])

    @translated
    def get_dlq_entry(self, dlq_id: str) -> DlqEntry | None:
        row = self._fetch_one(GET_DLQ_ENTRY, (dlq_id,))
        return None if row is None else dlq_entry_from_row(row)

    @translated
    def dlq_stats(self) -> DlqStats:
        found = self._fetch_all(DLQ_STATS, ())
        return DlqStats(counts=tuple(dlq_count_from_row(row) for row in found))


_DLQ_ENTRY_FIELDS = tuple(f.name for f in fields(DlqEntry))


def dlq_entry_columns(entries: Sequence[DlqEntry]) -> Columns:
    values = [
        {
            **{name: getattr(e, name) for name in _DLQ_ENTRY_FIELDS},
            "status": e.status.value,
            "code": e.code.value,
        }
        for e in entries
    ]
    return columns(values, _DLQ_ENTRY_FIELDS)


def dlq_entry_from_row(row: Row) -> DlqEntry:
    values = {name: row[name] for name in _DLQ_ENTRY_FIELDS}
    return DlqEntry(
        **{
            **values,
            "status": DlqStatus(row["status"]),
            "code": StatusCode(row["code"]),
            "envelope": bytes(row["envelope"]),
        }
    )


def dlq_query_params(query: DlqQuery) -> dict[str, Any]:
    after_at, after_id = query.after or (None, None)
    return {
        "status": None if query.status is None else query.status.value,
        "code": None if query.code is None else query.code.value,
        "error_class": query.error_class,
        "space": query.space,
        "document_id": query.document_id,
        "older_than_s": None if query.older_than_s is None else float(query.older_than_s),
        "limit": query.limit,
        "after_at": after_at,
        "after_id": after_id,
    }


def dlq_count_from_row(row: Row) -> DlqCount:
    return DlqCount(
        code=StatusCode(row["code"]),
        status=DlqStatus(row["status"]),
        entries=row["entries"],
        oldest_age_s=max(float(row["oldest_age_s"]), 0.0),
    )
