"""The claim check: the reference a plan event carries instead of a plan too large for the topic.

The plan's bytes (exactly what ``encode_plan`` wrote) are stored in PostgreSQL (``plan_claims``,
keyed by operation id and fingerprint) before the event that refers to them is published. The
event is an ordinary plan message — key, ``operation_id`` and ``fingerprint`` headers — with the
header ``claim_check: v1`` and, as its value, this small JSON reference (readable in a console
consumer)::

    {"claim_check": "v1", "operation_id": "...", "fingerprint": "v1:...", "bytes": 2345678}

The applier resolves it to the stored bytes and verifies them as it verifies any plan: they must
decode, recompute to their fingerprint, and be the plan the reference names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from graph_ingest.schemas.errors import DecodeError

CLAIM_CHECK_VERSION = "v1"
CLAIM_CHECK_CONTENT_TYPE = "application/vnd.graph-ingest.plan-claim-check+json;v=1"


@dataclass(frozen=True, slots=True)
class ClaimReference:
    operation_id: str
    fingerprint: str
    size: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.operation_id, self.fingerprint)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "claim_check": CLAIM_CHECK_VERSION,
                "operation_id": self.operation_id,
                "fingerprint": self.fingerprint,
                "bytes": self.size,
            },
            separators=(",", ":"),
        ).encode("utf-8")


@dataclass(frozen=True, slots=True)
class PlanClaim:
    """A frozen plan too large for the plans topic, kept for the applier (the claim check)."""

    operation_id: str
    fingerprint: str
    plan_bytes: bytes

    @property
    def key(self) -> tuple[str, str]:
        return (self.operation_id, self.fingerprint)


def parse_claim_reference(data: bytes) -> ClaimReference:
    """The reference in a claim-check event's value; DecodeError (raw bytes kept) if it is none."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("claim_check") != CLAIM_CHECK_VERSION:
            raise ValueError(f"not a {CLAIM_CHECK_VERSION} claim-check reference")
        reference = ClaimReference(
            operation_id=document["operation_id"],
            fingerprint=document["fingerprint"],
            size=document["bytes"],
        )
        if not all(isinstance(v, str) and v for v in reference.key) or not isinstance(
            reference.size, int
        ):
            raise ValueError("operation_id, fingerprint and bytes are required")
    except (ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        raise DecodeError(f"claim-check reference does not parse: {exc}", raw=bytes(data)) from exc
    return reference


__all__ = [
    "CLAIM_CHECK_CONTENT_TYPE",
    "CLAIM_CHECK_VERSION",
    "ClaimReference",
    "PlanClaim",
    "parse_claim_reference",
]
