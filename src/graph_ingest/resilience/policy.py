"""The retry policy of the apply loop: what a failure's status code says about who is to blame.

Pure decisions, no I/O. A failure is one of four kinds (its *scope*):

* ``DEPENDENCY`` — UNAVAILABLE, UNAUTHENTICATED, PERMISSION_DENIED: the service is down or refuses
  *us*. Nothing is wrong with the plans: retry the batch in place (partitions paused) for as long
  as it takes, never split it, never fail a plan for it.
* ``CONTENTION`` — ABORTED (deadlock, serialization failure, a zombie lost a race): the same work
  succeeds when tried again. Retry in place; after ``max_in_place_attempts`` split the batch (fewer
  plans, fewer locks), but never blame a plan for it.
* ``UNCERTAIN`` — DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL: a sick service or a plan too big
  to apply. Retry in place ``max_in_place_attempts`` times, then split; a plan that still fails
  alone is blamed only if the services answer a probe (else it is the service: retry in place).
* ``PLAN`` — every other code (INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS, DATA_LOSS,
  NOT_FOUND, ...): the plan is at fault. Split at once; the plan alone is failed.
"""

from __future__ import annotations

from enum import StrEnum

from graph_ingest.domain.status import StatusCode


class FailureScope(StrEnum):
    DEPENDENCY = "DEPENDENCY"
    CONTENTION = "CONTENTION"
    UNCERTAIN = "UNCERTAIN"
    PLAN = "PLAN"


class BatchAction(StrEnum):
    RETRY_IN_PLACE = "RETRY_IN_PLACE"
    SPLIT = "SPLIT"


class LonePlanAction(StrEnum):
    RETRY_IN_PLACE = "RETRY_IN_PLACE"
    PROBE_THEN_FAIL = "PROBE_THEN_FAIL"
    FAIL = "FAIL"


_SCOPES: dict[StatusCode, FailureScope] = {
    StatusCode.UNAVAILABLE: FailureScope.DEPENDENCY,
    StatusCode.UNAUTHENTICATED: FailureScope.DEPENDENCY,
    StatusCode.PERMISSION_DENIED: FailureScope.DEPENDENCY,
    StatusCode.ABORTED: FailureScope.CONTENTION,
    StatusCode.DEADLINE_EXCEEDED: FailureScope.UNCERTAIN,
    StatusCode.RESOURCE_EXHAUSTED: FailureScope.UNCERTAIN,
    StatusCode.INTERNAL: FailureScope.UNCERTAIN,
}


def scope_of(code: StatusCode) -> FailureScope:
    return _SCOPES.get(code, FailureScope.PLAN)


def batch_action(code: StatusCode, *, in_place_exhausted: bool) -> BatchAction:
    """A batch failed with ``code``: try it again as it is, or split it to find the culprit.

    ``in_place_exhausted``: the batch has already failed ``max_in_place_attempts`` times in a row
    with CONTENTION or UNCERTAIN errors.
    """
    scope = scope_of(code)
    if scope is FailureScope.DEPENDENCY:
        return BatchAction.RETRY_IN_PLACE
    if scope is FailureScope.PLAN or in_place_exhausted:
        return BatchAction.SPLIT
    return BatchAction.RETRY_IN_PLACE


def lone_plan_action(code: StatusCode) -> LonePlanAction:
    """A batch split down to one plan still fails with ``code``: is the plan to blame?"""
    scope = scope_of(code)
    if scope is FailureScope.PLAN:
        return LonePlanAction.FAIL
    if scope is FailureScope.UNCERTAIN:
        return LonePlanAction.PROBE_THEN_FAIL
    return LonePlanAction.RETRY_IN_PLACE


def counts_towards_split(code: StatusCode) -> bool:
    """Whether a failure brings the batch closer to being split (DEPENDENCY failures do not:
    after an outage the batch gets its full in-place attempts again)."""
    return scope_of(code) in (FailureScope.CONTENTION, FailureScope.UNCERTAIN)


__all__ = [
    "BatchAction",
    "FailureScope",
    "LonePlanAction",
    "batch_action",
    "counts_towards_split",
    "lone_plan_action",
    "scope_of",
]
