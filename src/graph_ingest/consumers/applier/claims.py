"""The applier's side of the claim check: a plan message that carries a reference instead of its
plan (``schemas.claim_check``) gets the stored plan, verified as any consumed plan is.

One lookup per poll batch. A reference whose plan is not stored, or whose stored bytes do not
decode, do not verify, or are another plan, makes the message poison (DATA_LOSS / INVALID_ARGUMENT:
the DLQ at once). A lookup that fails (PostgreSQL down) raises: the caller fetches the messages
again later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from graph_ingest.consumers.plan_message import PlanMessage, verified_plan
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode

ClaimLookup = Callable[[Sequence[tuple[str, str]]], Mapping[tuple[str, str], bytes]]


def resolve_claims(messages: Sequence[PlanMessage], lookup: ClaimLookup) -> list[PlanMessage]:
    """``messages`` with every claim-check message resolved (its plan, or why it has none)."""
    keys = [m.claim.key for m in messages if m.claim is not None]
    if not keys:
        return list(messages)
    found = lookup(keys)
    return [m if m.claim is None else _resolved(m, found.get(m.claim.key)) for m in messages]


def _resolved(message: PlanMessage, plan_bytes: bytes | None) -> PlanMessage:
    claim = message.claim
    assert claim is not None  # only claim-check messages are resolved
    if plan_bytes is None:
        error = GraphIngestError(
            f"claim-checked plan {claim.operation_id} ({claim.fingerprint}) is not stored",
            code=StatusCode.DATA_LOSS,
        )
        return replace(message, error=error)
    try:
        plan = verified_plan(plan_bytes)
        if (plan.operation_id, plan.fingerprint) != claim.key:
            raise GraphIngestError(
                f"claim check {claim.key} resolves to plan {plan.operation_id} "
                f"({plan.fingerprint})",
                code=StatusCode.DATA_LOSS,
            )
    except GraphIngestError as exc:
        return replace(message, error=exc)
    return replace(message, plan=plan, value=plan_bytes)


__all__ = ["ClaimLookup", "resolve_claims"]
