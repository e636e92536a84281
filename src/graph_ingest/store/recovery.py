"""The recovery port: leases on stranded operations, and the plans their recoverer re-publishes.

``producers/recovery.py`` (the recoverer and ``resume``) is its caller; each call is its own
short transaction, outside any unit of work.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.store.plan_claims import PlanClaimWriter


@dataclass(frozen=True, slots=True)
class RecoveryClaim:
    """An operation a recoverer (or ``resume``) holds the lease of, with its frozen plan."""

    operation: Operation
    plan_bytes: bytes
    claimed_by: str
    lease_until: datetime
    claims: int
    """How often the operation has been claimed for recovery, this claim included."""
    work_headers: Mapping[str, str] = field(default_factory=dict)
    """The headers admission kept with the operation (``NewOperation.work_headers``)."""


class RecoveryStore(PlanClaimWriter, Protocol):
    """Leases on stranded operations, so that two recoverers never re-publish the same one.

    A lease is taken in one short transaction and outlives it: the claim says "I am re-publishing
    this plan; leave it alone until ``lease_until``". Lease times are the database's clock, the
    one clock every recoverer shares. ``put_plan_claims`` runs in a transaction of its own."""

    def claim_for_recovery(
        self,
        *,
        stages: Collection[Stage],
        older_than_s: float,
        limit: int,
        claimer: str,
        lease_s: float,
    ) -> list[RecoveryClaim]:
        """Claim up to ``limit`` operations in ``stages``, unchanged for ``older_than_s``, whose
        lease is free (never taken or expired) and that no retry is scheduled for in the future;
        oldest (``updated_at``) first. A PARKED operation only once its document has reached
        (or passed) the revision it waits for: before that, its predecessor's commit releases
        it, and re-publishing it would only park it again. Rows another transaction holds locked (an applier at work,
        another recoverer claiming) are skipped, not waited for."""

    def claim_operation(
        self, operation_id: str, *, stages: Collection[Stage], claimer: str, lease_s: float
    ) -> RecoveryClaim | None:
        """Take the lease of one operation if it is in ``stages``, whoever held it (an operator's
        explicit resume); None if it does not exist or is in another stage."""

    def stranded_parked(self, *, older_than_s: float, limit: int) -> list[Operation]:
        """PARKED operations unchanged for ``older_than_s`` whose predecessor is gone: no
        operation expecting their document's committed revision is on its way (``ON_ITS_WAY``, or
        DEAD_LETTERED with an entry that is not RESOLVED), so the revision they wait for never
        commits. Oldest first, at most ``limit``."""

    def release_recovery_claim(self, operation_id: str, claimer: str) -> bool:
        """End ``claimer``'s lease early (its re-publish failed); False if it holds none."""


__all__ = ["RecoveryClaim", "RecoveryStore"]
