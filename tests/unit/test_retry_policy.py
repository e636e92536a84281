"""The apply loop's retry policy: every status code, in every situation."""

import pytest

from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.policy import (
    BatchAction,
    FailureScope,
    LonePlanAction,
    batch_action,
    counts_towards_split,
    lone_plan_action,
    scope_of,
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
def test_a_lone_plan_is_blamed_for_its_own_faults_and_after_a_probe_for_uncertain_ones(
    code: StatusCode,
) -> None:
    expected = {
        FailureScope.PLAN: LonePlanAction.FAIL,
        FailureScope.UNCERTAIN: LonePlanAction.PROBE_THEN_FAIL,
        FailureScope.CONTENTION: LonePlanAction.RETRY_IN_PLACE,
        FailureScope.DEPENDENCY: LonePlanAction.RETRY_IN_PLACE,
    }[SCOPES[code]]
    assert lone_plan_action(code) is expected


def test_only_contention_and_uncertain_failures_use_up_the_in_place_budget() -> None:
    counted = {code for code in StatusCode if counts_towards_split(code)}
    assert counted == {
        StatusCode.ABORTED,
        StatusCode.DEADLINE_EXCEEDED,
        StatusCode.RESOURCE_EXHAUSTED,
        StatusCode.INTERNAL,
    }
