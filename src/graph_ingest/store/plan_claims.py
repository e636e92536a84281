"""The claim check port: frozen plans too large for the plans topic, kept for the applier.

The planner (or a recoverer) stores the plan and sends a small claim instead; the applier reads
the plan back by (operation id, fingerprint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PlanClaim:
    """A frozen plan too large for the plans topic, kept for the applier (the claim check)."""

    operation_id: str
    fingerprint: str
    plan_bytes: bytes

    @property
    def key(self) -> tuple[str, str]:
        return (self.operation_id, self.fingerprint)


class PlanClaimWriter(Protocol):
    """Claim-checked plans, stored inside a unit of work (or, for a recoverer, on their own)."""

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        """Store claim-checked plans; an existing (operation id, fingerprint) is left as it is."""


class PlanClaimReader(Protocol):
    """Claim-checked plans read back by the applier (each call its own short read)."""

    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The claim-checked plan bytes of each (operation id, fingerprint) stored."""
        ...


__all__ = ["PlanClaim", "PlanClaimReader", "PlanClaimWriter"]
