"""The retry policy: what a failure's status code says about who is to blame, and where it goes.

Pure decisions, no I/O, in two steps.

**1. The apply loop, in place** (:func:`batch_action`, :func:`lone_plan_action`). A failure is one
of four kinds (its *scope*):

* ``DEPENDENCY`` — UNAVAILABLE, UNAUTHENTICATED, PERMISSION_DENIED: the service is down or refuses
  *us*. Nothing is wrong with the plans: retry the batch in place (partitions paused) for as long
  as it takes, never split it, never fail a plan for it.
* ``CONTENTION`` — ABORTED (deadlock, serialization failure, a zombie lost a race): the same work
  usually succeeds when tried again. Retry in place; after ``max_in_place_attempts`` split the
  batch (fewer plans, fewer locks); a plan that still fails alone is treated as UNCERTAIN below:
  a lock another transaction holds for longer than the in-place bound must not stall every
  partition of the applier, so the plan waits on the retry ladder and the rest moves on.
* ``UNCERTAIN`` — DEADLINE_EXCEEDED (a transaction timeout, a lock wait cut off by it),
  RESOURCE_EXHAUSTED, INTERNAL: a sick service or a plan too big to apply. Retry in place
  ``max_in_place_attempts`` times, then split; a plan that still fails alone is blamed only if
  the services answer a probe (else it is an outage: retry in place).
* ``PLAN`` — every other code (INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS, DATA_LOSS,
  NOT_FOUND, ...): the plan is at fault. Split at once; the plan alone is failed.

**2. Routing a plan the loop blamed** (:func:`route`, issue 6 item 1). Only a plan failed alone
(``LonePlanAction.FAIL``, or ``PROBE_THEN_FAIL`` with the services answering) is routed; ``route``
says where its message goes from where it is (the main topic, retry tier *k*, a DLQ replay):

* ``DEPENDENCY`` codes stay ``IN_PLACE`` whatever the attempt: an outage, or a service refusing
  our credentials, is waited out behind the breaker (partitions paused, no retry budget spent),
  never blamed on a plan and never sent to the DLQ. That is how "PERMISSION_DENIED and
  UNAUTHENTICATED never retry" is kept: no retry of the *plan* (no tier, no attempt counted) — the
  worker pauses until an operator fixes access, instead of dead-lettering every plan meanwhile.
* ABORTED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED go to the next tier, then the DLQ after the last.
* INTERNAL too, but only while fewer than ``max_internal_attempts`` deliveries have failed.
* ``PLAN`` codes go to the DLQ at once: the same bytes would fail the same way.
* From a replay, every routed failure returns to the DLQ (its history extended): a replay is an
  operator's one deliberate try, never the start of a loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from graph_ingest.domain.error_detail import RetryAdvice, RetryStrategy
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


ACCESS_REFUSED = frozenset({StatusCode.UNAUTHENTICATED, StatusCode.PERMISSION_DENIED})
"""A service refuses *us*: not transient (an operator must act), yet never the plan's fault."""

# The scope of each transient code (``StatusCode.is_transient``, the one transience rule) that is
# not UNCERTAIN.
_TRANSIENT_SCOPES: dict[StatusCode, FailureScope] = {
    StatusCode.UNAVAILABLE: FailureScope.DEPENDENCY,
    StatusCode.ABORTED: FailureScope.CONTENTION,
}


def scope_of(code: StatusCode) -> FailureScope:
    if code in ACCESS_REFUSED:
        return FailureScope.DEPENDENCY
    if not code.is_transient:
        return FailureScope.PLAN
    return _TRANSIENT_SCOPES.get(code, FailureScope.UNCERTAIN)


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
    """A batch split down to one plan still fails with ``code``: is the plan to blame?

    A CONTENTION or UNCERTAIN plan gets here only once the in-place bound is spent
    (``batch_action`` splits no earlier): whatever its code, it is the plan's to carry along the
    retry ladder once the services answer a probe. Only an outage-class code stays in place."""
    scope = scope_of(code)
    if scope is FailureScope.PLAN:
        return LonePlanAction.FAIL
    if scope is FailureScope.DEPENDENCY:
        return LonePlanAction.RETRY_IN_PLACE
    return LonePlanAction.PROBE_THEN_FAIL


def counts_towards_split(code: StatusCode) -> bool:
    """Whether a failure brings the batch closer to being split (DEPENDENCY failures do not:
    after an outage the batch gets its full in-place attempts again)."""
    return scope_of(code) in (FailureScope.CONTENTION, FailureScope.UNCERTAIN)


class Source(StrEnum):
    MAIN = "MAIN"
    TIER = "TIER"
    REPLAY = "REPLAY"


@dataclass(frozen=True, slots=True)
class Location:
    """Where the failed message was consumed: the main topic, retry tier ``tier_index`` (0-based
    index into the ladder), or a DLQ replay."""

    source: Source
    tier_index: int | None = None

    def __post_init__(self) -> None:
        if (self.source is Source.TIER) != (self.tier_index is not None):
            raise ValueError(f"{self.source} location with tier_index={self.tier_index}")
        if self.tier_index is not None and self.tier_index < 0:
            raise ValueError(f"tier_index must be >= 0, got {self.tier_index}")


MAIN = Location(Source.MAIN)
REPLAY = Location(Source.REPLAY)


def tier(index: int) -> Location:
    return Location(Source.TIER, index)


class RouteKind(StrEnum):
    IN_PLACE = "IN_PLACE"
    TIER = "TIER"
    DLQ = "DLQ"


@dataclass(frozen=True, slots=True)
class Route:
    kind: RouteKind
    tier_index: int | None = None
    """The tier to copy the message to (``TIER`` only)."""
    attempts_left: int | None = None
    """Deliveries left before the DLQ, the next one included: None in place (unbounded), 0 for
    the DLQ."""


_IN_PLACE = Route(RouteKind.IN_PLACE)
TO_DLQ = Route(RouteKind.DLQ, attempts_left=0)


def route(
    code: StatusCode,
    attempt: int,
    location: Location,
    ladder_length: int,
    max_internal_attempts: int,
) -> Route:
    """Where a failed message goes. ``attempt`` numbers the delivery that failed (1 for the first,
    the ``retry_attempt`` header on a tier copy); ``ladder_length`` is the number of retry tiers
    (any, 0 included); ``max_internal_attempts`` bounds the deliveries of an INTERNAL failure."""
    if code is StatusCode.OK:
        raise ValueError("OK is not a failure")
    if attempt < 1 or max_internal_attempts < 1 or ladder_length < 0:
        raise ValueError(
            f"attempt={attempt} and max_internal_attempts={max_internal_attempts} must be >= 1,"
            f" ladder_length={ladder_length} >= 0"
        )
    if location.tier_index is not None and location.tier_index >= ladder_length:
        raise ValueError(f"tier {location.tier_index} is not on a ladder of {ladder_length}")
    scope = scope_of(code)
    if scope is FailureScope.DEPENDENCY:
        return _IN_PLACE
    if scope is FailureScope.PLAN or location.source is Source.REPLAY:
        return TO_DLQ
    next_tier = 0 if location.tier_index is None else location.tier_index + 1
    attempts_left = ladder_length - next_tier
    if code is StatusCode.INTERNAL:
        attempts_left = min(attempts_left, max_internal_attempts - attempt)
    if attempts_left <= 0:
        return TO_DLQ
    return Route(RouteKind.TIER, tier_index=next_tier, attempts_left=attempts_left)


def retry_advice(decision: Route, tier_delays_s: Sequence[float]) -> RetryAdvice:
    """The retry advice a failure record carries for ``decision`` on a ladder of these delays."""
    if decision.kind is RouteKind.IN_PLACE:
        # The backoff and the breaker decide when: no fixed delay to advise.
        return RetryAdvice(retryable=True, strategy=RetryStrategy.IN_PLACE)
    if decision.kind is RouteKind.DLQ:
        return RetryAdvice(retryable=False, attempts_left=0, strategy=RetryStrategy.DEAD_LETTER)
    assert decision.tier_index is not None  # a TIER route names its tier
    return RetryAdvice(
        retryable=True,
        attempts_left=decision.attempts_left,
        retry_after_s=tier_delays_s[decision.tier_index],
        strategy=RetryStrategy.NEXT_TIER,
    )


# -- the planner ---------------------------------------------------------------------------------


class PlanningAction(StrEnum):
    RETRY = "RETRY"
    DLQ = "DLQ"


def planning_action(code: StatusCode, *, failing_for_s: float, budget_s: float) -> PlanningAction:
    """A request the planner could not plan: a transient failure (the extractor's endpoint down
    or throttling, a dependency's timeout; every scope but PLAN) is retried until it has been
    failing for ``budget_s``; a PLAN code (invalid document, schema violation, ambiguity) goes
    to the DLQ at once — planning the same request again would fail the same way."""
    if scope_of(code) is FailureScope.PLAN or failing_for_s >= budget_s:
        return PlanningAction.DLQ
    return PlanningAction.RETRY


__all__ = [
    "ACCESS_REFUSED",
    "MAIN",
    "REPLAY",
    "TO_DLQ",
    "BatchAction",
    "FailureScope",
    "Location",
    "LonePlanAction",
    "PlanningAction",
    "Route",
    "RouteKind",
    "Source",
    "batch_action",
    "counts_towards_split",
    "lone_plan_action",
    "planning_action",
    "retry_advice",
    "route",
    "scope_of",
    "tier",
]
