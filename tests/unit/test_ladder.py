"""Where a failed plan stands on the ladder: from its retry headers, or its recorded failures."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graph_ingest.consumers.applier.ladder import Ladder
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.error_detail import ErrorContext, ErrorDetail, RetryAdvice, RetryStrategy
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.resilience.policy import MAIN, REPLAY, tier
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.store.failures import FailureAttempt

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LADDER = Ladder(
    plans_topic="plans",
    tiers=(("plans.retry.1s", 1.0), ("plans.retry.5s", 5.0), ("plans.retry.30s", 30.0)),
    dlq_topic="plans.dlq",
    max_internal_attempts=2,
    max_message_bytes=1_000_000,
)


def failed(offset: int, at_tier: int | None, routed_to: str = "TIER") -> FailureAttempt:
    detail = ErrorDetail.create(
        trace_id=new_trace_id(),
        code=StatusCode.DEADLINE_EXCEEDED,
        error_class="GraphError",
        message="timed out",
        context=ErrorContext(worker_id="w", code_version="0"),
        retry=RetryAdvice(retryable=True, strategy=RetryStrategy.NEXT_TIER),
    )
    return FailureAttempt(("plans", 0, offset), "op-1", offset + 1, at_tier, routed_to, T0, detail)


def resumed(offset: int = 9, **headers: str) -> PlanMessage:
    """The plan re-published to the main topic (resume, recover, a release): no retry headers."""
    pairs = tuple((name, value.encode()) for name, value in headers.items())
    return PlanMessage("plans", 0, offset, b"it/doc", b"plan", headers=pairs)


def test_a_first_delivery_is_delivery_one_on_the_main_topic() -> None:
    assert LADDER.progress(resumed(), []) == (1, MAIN)


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([failed(0, None)], (2, tier(0))),
        ([failed(0, None), failed(1, 0)], (3, tier(1))),
        ([failed(0, None), failed(1, 0), failed(2, 1)], (4, tier(2))),
    ],
)
def test_a_resumed_plan_goes_on_from_the_tier_its_failures_reached(
    history: list[FailureAttempt], expected: tuple[int, object]
) -> None:
    assert LADDER.progress(resumed(), history) == expected


def test_a_plan_dead_lettered_for_its_content_has_no_ladder_position_to_keep() -> None:
    assert LADDER.progress(resumed(), [failed(0, None, routed_to="DLQ")]) == (2, MAIN)


def test_a_shortened_ladder_keeps_the_plan_on_its_last_tier() -> None:
    short = Ladder("plans", (("plans.retry.1s", 1.0),), "plans.dlq", 2, 1_000_000)
    assert short.progress(resumed(), [failed(0, None), failed(1, 0), failed(2, 1)]) == (
        4,
        tier(0),
    )


def test_a_replay_stays_a_replay_whatever_its_history() -> None:
    replay = resumed(9, **{kafka_headers.DLQ_REPLAY: "dlq-0123456789abcdef01234567"})
    assert LADDER.progress(replay, [failed(0, None), failed(1, 0)]) == (3, REPLAY)
