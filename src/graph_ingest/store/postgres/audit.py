"""The audit log port on PostgreSQL: ``audit_log`` rows, appended, read oldest first."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from graph_ingest.store.audit import AuditEntry, AuditQuery, AuditRecord
from graph_ingest.store.postgres.params import Row
from graph_ingest.store.postgres.session import PooledReads
from graph_ingest.store.postgres.translate import translated

AUDIT_COLUMNS = "audit_id, at, actor, action, target, details, reason"

APPEND_AUDIT = f"""
INSERT INTO audit_log (actor, action, target, details, reason)
VALUES (%(actor)s, %(action)s, %(target)s, %(details)s, %(reason)s)
RETURNING {AUDIT_COLUMNS}
"""

# The newest `limit` that match, handed back oldest first.
LIST_AUDIT = f"""
SELECT * FROM (
    SELECT {AUDIT_COLUMNS} FROM audit_log
    WHERE (%(since)s::timestamptz IS NULL OR at >= %(since)s::timestamptz)
      AND (%(action)s::text IS NULL OR action = %(action)s::text)
    ORDER BY audit_id DESC
    LIMIT %(limit)s
) AS newest
ORDER BY audit_id
"""


class PostgresAuditLog(PooledReads):
    """``AuditLog``: each call its own short transaction."""

    @translated
    def append_audit(self, record: AuditRecord) -> AuditEntry:
        row = self._fetch_one(
            APPEND_AUDIT,
            {
                "actor": record.actor,
                "action": record.action,
                "target": Jsonb(list(record.target)),
                "details": Jsonb(record.details),
                "reason": record.reason,
            },
        )
        assert row is not None  # INSERT ... RETURNING returns the row
        return audit_entry_from_row(row)

    @translated
    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        found = self._fetch_all(
            LIST_AUDIT, {"since": query.since, "action": query.action, "limit": query.limit}
        )
        return [audit_entry_from_row(row) for row in found]


def audit_entry_from_row(row: Row) -> AuditEntry:
    return AuditEntry(
        audit_id=row["audit_id"],
        at=row["at"],
        record=AuditRecord(
            actor=row["actor"],
            action=row["action"],
            target=tuple(row["target"]),
            reason=row["reason"],
            details=dict(row["details"]),
        ),
    )


__all__ = ["PostgresAuditLog"]
