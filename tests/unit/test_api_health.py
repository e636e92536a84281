"""The API's readiness, decided from its dependencies and the projection's lag (pure)."""

from __future__ import annotations

import pytest

from graph_ingest.api.health import UP, readiness
from graph_ingest.projections.lag import LagState, ProjectionLag

pytestmark = pytest.mark.timeout(30)


def lag(state: LagState) -> ProjectionLag:
    behind = 0 if state is LagState.IDLE else 7
    return ProjectionLag("operation_status", behind, float(behind), 1.0, state)


@pytest.mark.parametrize("state", [LagState.IDLE, LagState.CATCHING_UP])
def test_ready_when_both_answer_and_the_projection_moves(state: LagState) -> None:
    answer = readiness({"postgres": UP, "kafka": UP}, lag(state))
    assert answer.status == 200
    assert answer.body["status"] == "ready"
    assert answer.body["projections"][0]["state"] == state.value


def test_a_stalled_projection_is_degraded_but_still_served() -> None:
    answer = readiness({"postgres": UP, "kafka": UP}, lag(LagState.STALLED))
    assert answer.status == 200
    assert answer.body["status"] == "degraded"
    assert "stalled" in answer.body["reason"]


@pytest.mark.parametrize("down", ["postgres", "kafka"])
def test_not_ready_while_a_dependency_is_unreachable_and_it_says_which(down: str) -> None:
    dependencies = {"postgres": UP, "kafka": UP, down: "connection refused"}
    answer = readiness(dependencies, None)
    assert answer.status == 503
    assert answer.body["status"] == "not_ready"
    assert f"{down} unreachable: connection refused" in answer.body["reason"]
