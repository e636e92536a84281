"""Admission (DESIGN.md §4 step 2) as a pure decision: what to do with a plan, given its operation
record and its document's committed revision. No I/O; the applier carries the decision out."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import LEGAL_TRANSITIONS, Stage
from graph_ingest.domain.state import CommittedRevision
from graph_ingest.domain.status import StatusCode


class Verdict(StrEnum):
    REJECT = "REJECT"  # the operation_id is bound to another plan
    DUPLICATE = "DUPLICATE"  # already COMPLETED
    STALE = "STALE"  # already CONFLICT
    REPAIR = "REPAIR"  # the state commit happened; only the operation log is behind
    CONFLICT = "CONFLICT"  # the document moved past the plan's base (revision or lineage)
    PARK = "PARK"  # an earlier revision of the document has not committed yet
    PROCEED = "PROCEED"  # the document is at the expected revision: apply


@dataclass(frozen=True, slots=True)
class Admission:
    verdict: Verdict
    path: tuple[Stage, ...] = ()
    """The stages to walk through, in order (empty: the operation stays where it is)."""
    reason: ErrorInfo | None = None
    """Why, for REJECT, CONFLICT and PARK."""


# The legal path from each stage back to PREPARED (retry, release, replay).
_TO_PREPARED: dict[Stage, tuple[Stage, ...]] = {
    Stage.PREPARED: (),
    Stage.FAILED: (Stage.PREPARED,),
    Stage.PARKED: (Stage.PREPARED,),
    Stage.DEAD_LETTERED: (Stage.PREPARED,),
}
_FORWARD = (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED)


def decide(
    operation: Operation, plan: IngestionPlan, committed: CommittedRevision | None
) -> Admission:
    mismatch = binding_mismatch(operation, plan)
    if mismatch:
        return Admission(
            Verdict.REJECT,
            reason=ErrorInfo(
                code=StatusCode.ALREADY_EXISTS,
                error_class="OperationBindingMismatch",
                message=mismatch,
            ),
        )
    stage = operation.stage
    if stage is Stage.COMPLETED:
        return Admission(Verdict.DUPLICATE)
    if stage is Stage.CONFLICT:
        return Admission(Verdict.STALE)
    if committed is not None and committed.operation_id == plan.operation_id:
        return Admission(Verdict.REPAIR, path=path_to_completed(stage))
    current = committed.revision if committed else 0
    if current > plan.expected_revision:
        return Admission(
            Verdict.CONFLICT,
            path=path_to(stage, Stage.CONFLICT),
            reason=conflict_reason(current, plan.expected_revision),
        )
    if current == plan.expected_revision and not on_base(plan, committed):
        return Admission(
            Verdict.CONFLICT,
            path=path_to(stage, Stage.CONFLICT),
            reason=lineage_conflict_reason(plan, committed),
        )
    if current < plan.expected_revision:
        path = () if stage is Stage.PARKED else path_to(stage, Stage.PARKED)
        return Admission(
            Verdict.PARK,
            path=path,
            reason=ErrorInfo(
                code=StatusCode.FAILED_PRECONDITION,
                error_class="WaitingForEarlierRevision",
                message=f"document at revision {current}, plan expects "
                f"{plan.expected_revision}: parked until that revision commits",
            ),
        )
    return Admission(Verdict.PROCEED, path=_TO_PREPARED.get(stage, ()))


def path_to(stage: Stage, target: Stage) -> tuple[Stage, ...]:
    """Shortest legal path to ``target``: directly, or by way of PREPARED."""
    if target in LEGAL_TRANSITIONS[stage]:
        return (target,)
    return (*_TO_PREPARED.get(stage, ()), target)


def path_to_completed(stage: Stage) -> tuple[Stage, ...]:
    if stage in _FORWARD:
        return _FORWARD[_FORWARD.index(stage) + 1 :]
    return (*_TO_PREPARED.get(stage, ()), *_FORWARD)


def conflict_reason(current: int | None, expected: int) -> ErrorInfo:
    at = "moved past" if current is None else f"at revision {current}, past"
    return ErrorInfo(
        code=StatusCode.FAILED_PRECONDITION,
        error_class="RevisionConflict",
        message=f"document {at} the plan's expected revision {expected}: "
        "the plan is stale, replan against the current state",
    )


def on_base(plan: IngestionPlan, committed: CommittedRevision | None) -> bool:
    """Whether the committed state is the one the plan was planned on (DESIGN.md §7a): the same
    revision is not enough, another lineage may have committed it."""
    return (committed.operation_id if committed else None) == plan.base_operation_id


def applies_onto(plan: IngestionPlan, committed: CommittedRevision | None) -> bool:
    """Whether ``committed`` is exactly the state the plan was planned on (revision and base)."""
    current = committed.revision if committed else 0
    return current == plan.expected_revision and on_base(plan, committed)


def lineage_conflict_reason(plan: IngestionPlan, committed: CommittedRevision | None) -> ErrorInfo:
    at = committed.operation_id if committed else "no state"
    return ErrorInfo(
        code=StatusCode.FAILED_PRECONDITION,
        error_class="LineageConflict",
        message=f"document at revision {plan.expected_revision} committed by {at}, but the plan "
        f"was planned on {plan.base_operation_id or 'no state'}: the plan is stale, replan "
        "against the current state",
    )


def unless_orphaned(
    admission: Admission, stage: Stage, plan: IngestionPlan, base: Operation | None
) -> Admission:
    """A PARK whose base conflicted is a CONFLICT: the state the plan was planned on will never
    be committed. Replanned, it applies. (A base not admitted yet may still come: it parks.)"""
    if admission.verdict is not Verdict.PARK or base is None or base.stage is not Stage.CONFLICT:
        return admission
    return Admission(
        Verdict.CONFLICT, path=path_to(stage, Stage.CONFLICT), reason=orphan_reason(plan)
    )


def orphan_reason(plan: IngestionPlan) -> ErrorInfo:
    """Why a plan parked on ``plan.base_operation_id`` conflicts: that operation conflicted."""
    return ErrorInfo(
        code=StatusCode.FAILED_PRECONDITION,
        error_class="LineageConflict",
        message=f"the plan was planned on {plan.base_operation_id}, which conflicted: the state "
        "it expects will never be committed; replan against the current state",
    )


def binding_mismatch(operation: Operation, plan: IngestionPlan) -> str | None:
    bound = (
        operation.fingerprint,
        operation.space,
        operation.document_id,
        operation.expected_revision,
    )
    offered = (plan.fingerprint, plan.space, plan.document_id, plan.expected_revision)
    if bound == offered:
        return None
    return (
        f"operation {plan.operation_id} is bound to plan {operation.fingerprint} of "
        f"{operation.space}/{operation.document_id}@{operation.expected_revision}; refusing "
        f"{plan.fingerprint} of {plan.space}/{plan.document_id}@{plan.expected_revision}"
    )


__all__ = [
    "Admission",
    "Verdict",
    "applies_onto",
    "binding_mismatch",
    "conflict_reason",
    "decide",
    "lineage_conflict_reason",
    "on_base",
    "orphan_reason",
    "path_to",
    "path_to_completed",
    "unless_orphaned",
]
