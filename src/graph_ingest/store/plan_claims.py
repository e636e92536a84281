"""The claim check port: frozen plans too large for the plans topic, kept for the applier.

The planner (or a recoverer) stores the plan and sends a small claim instead; the applier reads
the plan back by (operation id, fingerprint).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_ingest.schemas.claim_check import PlanClaim


class PlanClaimWriter(Protocol):
    """Claim-checked plans, stored inside a unit of work (or, for a recoverer, on their own)."""

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        """Store claim-checked plans; an existing (operation id, fingerprint) is left as it is."""


class PlanClaimReader(Protocol):
    """Claim-checked plans read back by the applier (each call its own short read)."""

    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The claim-checked plan bytes of each (operation id, fingerprint) stored."""
        ...


__all__ = ["PlanClaimReader", "PlanClaimWriter"]
