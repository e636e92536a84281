"""The claim check on PostgreSQL: ``plan_claims`` rows by (operation id, fingerprint)."""

from __future__ import annotations

from collections.abc import Sequence

from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.store.postgres.params import Columns, key_columns
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated

PUT_PLAN_CLAIMS = """
INSERT INTO plan_claims (operation_id, fingerprint, plan_bytes)
SELECT * FROM unnest(%(operation_id)b::text[], %(fingerprint)b::text[], %(plan_bytes)b::bytea[])
ON CONFLICT (operation_id, fingerprint) DO NOTHING
"""


PLAN_CLAIMS = """
SELECT c.operation_id, c.fingerprint, c.plan_bytes
FROM plan_claims c
JOIN unnest(%(operation_id)b::text[], %(fingerprint)b::text[]) AS k(operation_id, fingerprint)
  ON c.operation_id = k.operation_id AND c.fingerprint = k.fingerprint
"""


class PostgresPlanClaimWriter(TransactionSession):
    """``PlanClaimWriter`` in a unit of work."""

    @translated
    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        unique = {c.key: c for c in claims}
        if unique:
            self._execute(PUT_PLAN_CLAIMS, plan_claim_columns(list(unique.values())))


class PostgresPlanClaimReader(PooledReads):
    """``PlanClaimReader``: one short read per call."""

    @translated
    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        unique = sorted(set(keys))
        if not unique:
            return {}
        found = self._fetch_all(
            PLAN_CLAIMS,
            key_columns(("operation_id", "fingerprint"), unique),
        )
        return {
            (row["operation_id"], row["fingerprint"]): bytes(row["plan_bytes"]) for row in found
        }


def plan_claim_columns(claims: Sequence[PlanClaim]) -> Columns:
    return {
        "operation_id": [c.operation_id for c in claims],
        "fingerprint": [c.fingerprint for c in claims],
        "plan_bytes": [c.plan_bytes for c in claims],
    }
