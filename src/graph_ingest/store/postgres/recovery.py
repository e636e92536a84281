"""The recovery port on PostgreSQL: leases on stranded operations (own short transactions).

Each call is its own transaction: the pooled connection commits when the block ends.
"""

from __future__ import annotations

from collections.abc import Collection

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.store.postgres.fragments import (
    OPERATION_COLUMNS_OF_O,
    nothing_on_its_way,
    on_its_way_params,
)
from graph_ingest.store.postgres.operation_rows import operation_from_row
from graph_ingest.store.postgres.params import Row
from graph_ingest.store.postgres.session import PooledReads
from graph_ingest.store.postgres.translate import translated
from graph_ingest.store.recovery import RecoveryClaim

_RECOVERY_RETURNING = (
    "RETURNING "
    + OPERATION_COLUMNS_OF_O
    + ", o.plan_bytes, o.work_headers, o.recovery_claimed_by, o.recovery_lease_until,"
    + " o.recovery_claims"
)


# SKIP LOCKED: two recoverers claiming at once take disjoint rows, and neither waits for an
# applier holding an operation. A row whose lease another recoverer committed after this
# statement's snapshot is re-checked on the newest version (READ COMMITTED) and left out.
CLAIM_FOR_RECOVERY = (
    """
WITH candidates AS (
    SELECT operation_id
    FROM operations
    WHERE stage = ANY(%(stages)b::text[])
      AND updated_at <= now() - make_interval(secs => %(older_than_s)b)
      AND (recovery_lease_until IS NULL OR recovery_lease_until <= now())
      AND (next_retry_at IS NULL OR next_retry_at <= now())
      -- A PARKED operation is stranded only once its document has reached the revision it waits
      -- for (its release was lost) or passed it; before that, its predecessor releases it.
      AND (stage <> %(parked)b OR EXISTS (
          SELECT 1 FROM document_states AS d
          WHERE d.space = operations.space AND d.document_id = operations.document_id
            AND d.revision >= operations.expected_revision))
    ORDER BY updated_at, operation_id
    LIMIT %(limit)b
    FOR UPDATE SKIP LOCKED
)
UPDATE operations AS o
SET recovery_claimed_by = %(claimer)b,
    recovery_lease_until = now() + make_interval(secs => %(lease_s)b),
    recovery_claims = o.recovery_claims + 1
FROM candidates AS c
WHERE o.operation_id = c.operation_id
"""
    + _RECOVERY_RETURNING
)


CLAIM_OPERATION = (
    """
UPDATE operations AS o
SET recovery_claimed_by = %(claimer)b,
    recovery_lease_until = now() + make_interval(secs => %(lease_s)b),
    recovery_claims = o.recovery_claims + 1
WHERE o.operation_id = %(operation_id)b AND o.stage = ANY(%(stages)b::text[])
"""
    + _RECOVERY_RETURNING
)


# PARKED operations whose predecessor is gone: no operation of the document that expects its
# committed revision is on its way, so the revision they wait for never commits.
STRANDED_PARKED = (
    "SELECT "
    + OPERATION_COLUMNS_OF_O
    + """
FROM operations AS o
LEFT JOIN document_states AS s ON s.space = o.space AND s.document_id = o.document_id
WHERE o.stage = %(parked)b
  AND o.updated_at <= now() - make_interval(secs => %(older_than_s)b)
  AND o.expected_revision > COALESCE(s.revision, 0)
  AND """
    + nothing_on_its_way("COALESCE(s.revision, 0)")
    + """
ORDER BY o.updated_at, o.operation_id
LIMIT %(limit)b
"""
)


RELEASE_RECOVERY_CLAIM = """
UPDATE operations
SET recovery_lease_until = NULL
WHERE operation_id = %s AND recovery_claimed_by = %s AND recovery_lease_until IS NOT NULL
RETURNING operation_id
"""


class PostgresRecoveryLeases(PooledReads):
    """``RecoveryStore``'s leases (its ``put_plan_claims`` is the store's)."""

    @translated
    def claim_for_recovery(
        self,
        *,
        stages: Collection[Stage],
        older_than_s: float,
        limit: int,
        claimer: str,
        lease_s: float,
    ) -> list[RecoveryClaim]:
        found = self._fetch_all(
            CLAIM_FOR_RECOVERY,
            {
                "stages": sorted(stage.value for stage in stages),
                "parked": Stage.PARKED.value,
                "older_than_s": float(older_than_s),
                "limit": limit,
                "claimer": claimer,
                "lease_s": float(lease_s),
            },
        )
        claims = [recovery_claim_from_row(row) for row in found]
        return sorted(
            claims, key=lambda c: (c.operation.updated_at, c.operation.operation_id)
        )  # RETURNING keeps no order

    @translated
    def claim_operation(
        self, operation_id: str, *, stages: Collection[Stage], claimer: str, lease_s: float
    ) -> RecoveryClaim | None:
        row = self._fetch_one(
            CLAIM_OPERATION,
            {
                "operation_id": operation_id,
                "stages": sorted(stage.value for stage in stages),
                "claimer": claimer,
                "lease_s": float(lease_s),
            },
        )
        return None if row is None else recovery_claim_from_row(row)

    @translated
    def stranded_parked(self, *, older_than_s: float, limit: int) -> list[Operation]:
        found = self._fetch_all(
            STRANDED_PARKED,
            {
                "parked": Stage.PARKED.value,
                "older_than_s": float(older_than_s),
                "limit": limit,
                **on_its_way_params(),
            },
        )
        return [operation_from_row(row) for row in found]

    @translated
    def release_recovery_claim(self, operation_id: str, claimer: str) -> bool:
        return bool(self._fetch_all(RELEASE_RECOVERY_CLAIM, (operation_id, claimer)))


def recovery_claim_from_row(row: Row) -> RecoveryClaim:
    """An operation row with ``plan_bytes`` and its ``recovery_*`` columns."""
    return RecoveryClaim(
        operation=operation_from_row(row),
        plan_bytes=bytes(row["plan_bytes"]),
        work_headers=dict(row["work_headers"]),
        claimed_by=row["recovery_claimed_by"],
        lease_until=row["recovery_lease_until"],
        claims=row["recovery_claims"],
    )
