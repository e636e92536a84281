"""The retry policy: every status code, in every situation, in place and routed."""

import pytest

from graph_ingest.domain.error_detail import RetryAdvice, RetryStrategy
from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.policy import (
    ACCESS_REFUSED,
    MAIN,
    REPLAY,
    BatchAction,
    FailureScope,
    Location,
    LonePlanAction,
    Route,
    RouteKind,
    Source,
    batch_action,
    counts_towards_split,
    lone_plan_action,
    retry_advice,
    route,
    scope_of,
    tier,
)

SCOPES = {
    StatusCode.UNAVAILABLE: FailureScope.DEPENDENCY,
    StatusCode.UNAUTHENTICATED: FailureScope.DEPENDENCY,
    StatusCode.PERMISSION_DENIED: FailureScope.DEPENDENCY,
    StatusCode.ABORTED: FailureScope.CONTENTION,
    StatusCode.DEADLINE_EXCEEDED: FailureScope.UNCERTAIN,
    StatusCode.RESOURCE_EXHAUSTED: FailureScope.UNCERTAIN,
    StatusCode.INTERNAL: FailureScope.UNCERTAIN,
    StatusCode.INVALID_ARGUMENT: FailureScope.PLAN,
    StatusCode.FAILED_PRECONDITION: FailureScope.PLAN,
    StatusCode.ALREADY_EXISTS: FailureScope.PLAN,
    StatusCode.DATA_LOSS: FailureScope.PLAN,
    StatusCode.NOT_FOUND: FailureScope.PLAN,
    StatusCode.OK: FailureScope.PLAN,
}


def test_every_code_has_the_scope_the_policy_table_gives() -> None:
    assert {code: scope_of(code) for code in StatusCode} == SCOPES


@pytest.mark.parametrize("code", list(StatusCode))
@pytest.mark.parametrize("exhausted", [False, True])
def test_a_batch_is_split_for_plan_failures_and_for_the_others_only_once_exhausted(
    code: StatusCode, exhausted: bool
) -> None:
    scope = SCOPES[code]
    split = scope is FailureScope.PLAN or (exhausted and scope is not FailureScope.DEPENDENCY)
    expected = BatchAction.SPLIT if split else BatchAction.RETRY_IN_PLACE
    assert batch_action(code, in_place_exhausted=exhausted) is expected


@pytest.mark.parametrize("code", list(StatusCode))
def test_a_lone_plan_is_blamed_for_its_own_faults_and_after_a_probe_for_any_but_an_outage(
    code: StatusCode,
) -> None:
    expected = {
        FailureScope.PLAN: LonePlanAction.FAIL,
        FailureScope.UNCERTAIN: LonePlanAction.PROBE_THEN_FAIL,
        FailureScope.CONTENTION: LonePlanAction.PROBE_THEN_FAIL,
        FailureScope.DEPENDENCY: LonePlanAction.RETRY_IN_PLACE,
    }[SCOPES[code]]
    assert lone_plan_action(code) is expected


def test_a_lone_plan_losing_every_lock_wait_follows_the_ladder_once_the_services_answer() -> None:
    # Given a plan that keeps failing ABORTED in place (a lock held elsewhere) until split alone
    assert batch_action(StatusCode.ABORTED, in_place_exhausted=False) is BatchAction.RETRY_IN_PLACE
    assert batch_action(StatusCode.ABORTED, in_place_exhausted=True) is BatchAction.SPLIT
    # When it still fails alone, it is probed, then routed to the first tier, not kept in place
    assert lone_plan_action(StatusCode.ABORTED) is LonePlanAction.PROBE_THEN_FAIL
    assert route(StatusCode.ABORTED, 1, MAIN, 3, 2) == Route(RouteKind.TIER, 0, 3)


def test_only_contention_and_uncertain_failures_use_up_the_in_place_budget() -> None:
    counted = {code for code in StatusCode if counts_towards_split(code)}
    assert counted == {
        StatusCode.ABORTED,
        StatusCode.DEADLINE_EXCEEDED,
        StatusCode.RESOURCE_EXHAUSTED,
        StatusCode.INTERNAL,
    }


# --- routing a plan the loop blamed (issue 6 item 1) ---------------------------------------------

IN_PLACE_CODES = {StatusCode.UNAVAILABLE, StatusCode.UNAUTHENTICATED, StatusCode.PERMISSION_DENIED}
TIERED_CODES = {StatusCode.ABORTED, StatusCode.DEADLINE_EXCEEDED, StatusCode.RESOURCE_EXHAUSTED}
NEVER_RETRIED_CODES = {
    StatusCode.INVALID_ARGUMENT,
    StatusCode.FAILED_PRECONDITION,
    StatusCode.ALREADY_EXISTS,
    StatusCode.DATA_LOSS,
    StatusCode.NOT_FOUND,
}
FAILURE_CODES = [code for code in StatusCode if code is not StatusCode.OK]
LADDER_LENGTHS = [0, 1, 3, 5]
MAX_INTERNAL = [1, 2, 3, 7]


def locations(ladder_length: int) -> list[Location]:
    return [MAIN, REPLAY, *(tier(k) for k in range(ladder_length))]


def expected_route(
    code: StatusCode, attempt: int, location: Location, ladder: int, max_internal: int
) -> Route:
    """The issue's table, written out case by case (an independent statement of route)."""
    if code in IN_PLACE_CODES:
        return Route(RouteKind.IN_PLACE)
    dlq = Route(RouteKind.DLQ, attempts_left=0)
    if code in NEVER_RETRIED_CODES or location.source is Source.REPLAY:
        return dlq
    next_tier = 0 if location.source is Source.MAIN else (location.tier_index or 0) + 1
    if next_tier >= ladder:
        return dlq
    tiers_left = ladder - next_tier
    if code in TIERED_CODES:
        return Route(RouteKind.TIER, next_tier, tiers_left)
    assert code is StatusCode.INTERNAL
    if attempt >= max_internal:
        return dlq
    return Route(RouteKind.TIER, next_tier, min(tiers_left, max_internal - attempt))


def test_the_code_sets_of_the_table_cover_every_failure_code_once() -> None:
    sets = [IN_PLACE_CODES, TIERED_CODES, {StatusCode.INTERNAL}, NEVER_RETRIED_CODES]
    assert sum(len(s) for s in sets) == len(FAILURE_CODES)
    assert set().union(*sets) == set(FAILURE_CODES)


@pytest.mark.parametrize("code", FAILURE_CODES)
@pytest.mark.parametrize("ladder", LADDER_LENGTHS)
@pytest.mark.parametrize("max_internal", MAX_INTERNAL)
def test_every_code_location_and_attempt_boundary_routes_as_the_table_says(
    code: StatusCode, ladder: int, max_internal: int
) -> None:
    for location in locations(ladder):
        for attempt in range(1, max_internal + ladder + 3):
            got = route(code, attempt, location, ladder, max_internal)
            want = expected_route(code, attempt, location, ladder, max_internal)
            assert got == want, (code, attempt, location, ladder, max_internal)


def journey(code: StatusCode, ladder: int, max_internal: int) -> list[Route]:
    """Route one message from the main topic until it leaves the ladder, failing every time."""
    routes, location, attempt = [], MAIN, 1
    while True:
        decision = route(code, attempt, location, ladder, max_internal)
        routes.append(decision)
        if decision.kind is not RouteKind.TIER:
            return routes
        assert decision.tier_index is not None
        location, attempt = tier(decision.tier_index), attempt + 1


@pytest.mark.parametrize("code", sorted(TIERED_CODES))
@pytest.mark.parametrize("ladder", LADDER_LENGTHS)
def test_a_retryable_failure_climbs_every_tier_in_order_then_reaches_the_dlq(
    code: StatusCode, ladder: int
) -> None:
    routes = journey(code, ladder, max_internal=1)  # INTERNAL's bound does not apply to these
    assert [r.tier_index for r in routes[:-1]] == list(range(ladder))
    assert [r.attempts_left for r in routes[:-1]] == list(range(ladder, 0, -1))
    assert routes[-1] == Route(RouteKind.DLQ, attempts_left=0)


@pytest.mark.parametrize("ladder", LADDER_LENGTHS)
@pytest.mark.parametrize("max_internal", MAX_INTERNAL)
def test_internal_gets_at_most_max_internal_attempts_deliveries(
    ladder: int, max_internal: int
) -> None:
    routes = journey(StatusCode.INTERNAL, ladder, max_internal)

    deliveries = len(routes)  # the first on the main topic, one per tier copy
    assert deliveries == min(max_internal, ladder + 1)
    assert routes[-1].kind is RouteKind.DLQ


def test_internal_boundary_with_three_tiers_and_two_attempts() -> None:
    assert route(StatusCode.INTERNAL, 1, MAIN, 3, 2) == Route(RouteKind.TIER, 0, 1)
    assert route(StatusCode.INTERNAL, 2, tier(0), 3, 2) == Route(RouteKind.DLQ, attempts_left=0)


@pytest.mark.parametrize("code", sorted(IN_PLACE_CODES))
def test_outages_stay_in_place_from_anywhere_and_however_often(code: StatusCode) -> None:
    for location in locations(3):
        assert route(code, 10_000, location, 3, 1).kind is RouteKind.IN_PLACE


@pytest.mark.parametrize(
    ("attempt", "location", "ladder", "max_internal"),
    [
        (0, MAIN, 3, 2),
        (1, MAIN, -1, 2),
        (1, MAIN, 3, 0),
        (2, tier(3), 3, 2),
        (2, tier(0), 0, 2),
    ],
)
def test_impossible_arguments_are_refused(
    attempt: int, location: Location, ladder: int, max_internal: int
) -> None:
    with pytest.raises(ValueError):
        route(StatusCode.ABORTED, attempt, location, ladder, max_internal)


def test_ok_is_not_a_failure_to_route() -> None:
    with pytest.raises(ValueError, match="OK"):
        route(StatusCode.OK, 1, MAIN, 3, 2)


@pytest.mark.parametrize(
    ("source", "index"),
    [(Source.TIER, None), (Source.MAIN, 0), (Source.REPLAY, 1), (Source.TIER, -1)],
)
def test_a_location_names_a_tier_exactly_when_it_is_one(source: Source, index: int | None) -> None:
    with pytest.raises(ValueError):
        Location(source, index)


DELAYS = (1.0, 5.0, 30.0)


def test_retry_advice_of_a_tier_route_gives_that_tier_s_delay() -> None:
    advice = retry_advice(route(StatusCode.ABORTED, 2, tier(0), 3, 2), DELAYS)

    assert advice == RetryAdvice(
        retryable=True, attempts_left=2, retry_after_s=5.0, strategy=RetryStrategy.NEXT_TIER
    )


def test_retry_advice_in_place_leaves_the_delay_to_backoff_and_breaker() -> None:
    advice = retry_advice(route(StatusCode.UNAVAILABLE, 1, MAIN, 3, 2), DELAYS)

    assert advice == RetryAdvice(retryable=True, strategy=RetryStrategy.IN_PLACE)


def test_retry_advice_of_the_dlq_is_not_retryable() -> None:
    advice = retry_advice(route(StatusCode.DATA_LOSS, 1, MAIN, 3, 2), DELAYS)

    assert advice == RetryAdvice(
        retryable=False, attempts_left=0, strategy=RetryStrategy.DEAD_LETTER
    )


@pytest.mark.parametrize("code", [c for c in StatusCode if c is not StatusCode.OK])
def test_the_scopes_refine_the_one_transience_rule(code: StatusCode) -> None:
    # A code is the plan's fault exactly when it is neither transient nor a refusal of access.
    is_plan = scope_of(code) is FailureScope.PLAN
    assert is_plan is not (code.is_transient or code in ACCESS_REFUSED)
