"""The parking port on PostgreSQL: the operations waiting behind another version, locked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.store.parking import StoredPlan
from graph_ingest.store.postgres.fragments import (
    OPERATION_COLUMNS,
    OPERATION_COLUMNS_OF_O,
    nothing_on_its_way,
    on_its_way_params,
)
from graph_ingest.store.postgres.operation_rows import operation_from_row
from graph_ingest.store.postgres.params import DocumentKey, key_columns
from graph_ingest.store.postgres.session import TransactionSession
from graph_ingest.store.postgres.translate import translated

PARKED_BEHIND = (
    "SELECT "
    + OPERATION_COLUMNS_OF_O
    + """, o.plan_bytes, o.work_headers
FROM operations AS o
JOIN unnest(%(space)b::text[], %(document_id)b::text[], %(expected_revision)b::int[])
  WITH ORDINALITY AS k(space, document_id, expected_revision, ord)
  ON o.space = k.space AND o.document_id = k.document_id
 AND o.expected_revision = k.expected_revision
WHERE o.stage = %(parked)b
   OR (o.stage = %(dead_lettered)b AND EXISTS (
        SELECT 1 FROM dlq_entries AS d
        WHERE d.dlq_id = o.dlq_id AND d.parked_behind IS NOT NULL AND d.status = %(pending)b))
ORDER BY k.ord, o.created_at, o.operation_id
FOR UPDATE OF o
"""
)


PARKED_ON_DOCUMENT = (
    "SELECT"
    + OPERATION_COLUMNS
    + """, plan_bytes
FROM operations
WHERE space = %(space)b AND document_id = %(document_id)b AND stage = %(stage)b
ORDER BY expected_revision, created_at, operation_id
FOR UPDATE
"""
)


def _dead_lettered_at(entry_status: str, condition: str | None = None) -> str:
    """Per (space, document_id, expected_revision) of the keys: the oldest DEAD_LETTERED operation
    expecting that revision whose entry has status ``entry_status`` (a parameter), where
    ``condition`` (if any) holds."""
    also = f" AND {condition}" if condition else ""
    return (
        "SELECT DISTINCT ON (o.space, o.document_id) "
        + OPERATION_COLUMNS_OF_O
        + f"""
FROM operations AS o
JOIN unnest(%(space)b::text[], %(document_id)b::text[], %(expected_revision)b::int[])
  AS k(space, document_id, expected_revision)
  ON o.space = k.space AND o.document_id = k.document_id
 AND o.expected_revision = k.expected_revision
JOIN dlq_entries AS d ON d.dlq_id = o.dlq_id AND d.status = {entry_status}
WHERE o.stage = %(dead_lettered)b{also}
ORDER BY o.space, o.document_id, o.created_at, o.operation_id
"""
    )


DEAD_LETTERED_AT = _dead_lettered_at("%(pending)b")


# A purged leader: its entry RESOLVED, and nothing else on its way to commit its revision.
PURGED_LEADERS_AT = _dead_lettered_at("%(resolved)b", nothing_on_its_way("o.expected_revision"))


# The later versions of a document that wait behind its operation expecting %(revision)s: parked,
# or dead-lettered with an entry still pending review (they followed it to the DLQ).
WAITING_BEHIND = (
    "SELECT"
    + OPERATION_COLUMNS
    + """
FROM operations AS o
WHERE o.space = %(space)b AND o.document_id = %(document_id)b
  AND o.expected_revision > %(revision)b
  AND (o.stage = %(parked)b OR (o.stage = %(dead_lettered)b AND EXISTS (
        SELECT 1 FROM dlq_entries AS d WHERE d.dlq_id = o.dlq_id AND d.status = %(pending)b)))
ORDER BY o.expected_revision, o.created_at, o.operation_id
FOR UPDATE
"""
)


class PostgresParkedOperations(TransactionSession):
    """``ParkedOperations`` in a unit of work."""

    @translated
    def parked_behind(self, keys: Sequence[tuple[str, str, int]]) -> list[StoredPlan]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return []
        found = self._fetch(
            PARKED_BEHIND,
            {
                **key_columns(("space", "document_id", "expected_revision"), unique),
                "parked": Stage.PARKED.value,
                "dead_lettered": Stage.DEAD_LETTERED.value,
                "pending": DlqStatus.PENDING_REVIEW.value,
            },
        )
        return [
            StoredPlan(operation_from_row(row), bytes(row["plan_bytes"]), dict(row["work_headers"]))
            for row in found
        ]

    @translated
    def parked_on_document(self, space: str, document_id: str) -> list[tuple[Operation, bytes]]:
        found = self._fetch(
            PARKED_ON_DOCUMENT,
            {"space": space, "document_id": document_id, "stage": Stage.PARKED.value},
        )
        return [(operation_from_row(row), bytes(row["plan_bytes"])) for row in found]

    @translated
    def dead_lettered_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[DocumentKey, Operation]:
        return self._by_document(
            DEAD_LETTERED_AT,
            keys,
            {"dead_lettered": Stage.DEAD_LETTERED.value, "pending": DlqStatus.PENDING_REVIEW.value},
        )

    @translated
    def purged_leaders_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[DocumentKey, Operation]:
        return self._by_document(PURGED_LEADERS_AT, keys, on_its_way_params())

    def _by_document(
        self, query: str, keys: Sequence[tuple[str, str, int]], params: Mapping[str, Any]
    ) -> dict[DocumentKey, Operation]:
        """The operation ``query`` finds per (space, document_id, expected_revision) key."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        found = self._fetch(
            query,
            {**key_columns(("space", "document_id", "expected_revision"), unique), **params},
        )
        return {(row["space"], row["document_id"]): operation_from_row(row) for row in found}

    @translated
    def waiting_behind(self, leader: Operation) -> list[Operation]:
        found = self._fetch(
            WAITING_BEHIND,
            {
                "space": leader.space,
                "document_id": leader.document_id,
                "revision": leader.expected_revision,
                "parked": Stage.PARKED.value,
                "dead_lettered": Stage.DEAD_LETTERED.value,
                "pending": DlqStatus.PENDING_REVIEW.value,
            },
        )
        return [operation_from_row(row) for row in found]
