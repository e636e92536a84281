"""ErrorDetail: the structured record of one failure, bounded and storable whatever it quotes."""

from typing import Any

import pytest
from pydantic import ValidationError

from graph_ingest.domain.error_detail import (
    ErrorContext,
    ErrorDetail,
    RetryAdvice,
    RetryStrategy,
)
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.limits import ELLIPSIS, MAX_ERROR_MESSAGE_LENGTH
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.classify import error_detail

pytestmark = pytest.mark.timeout(10)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CONTEXT = ErrorContext(
    topic="ingestion.plans",
    partition=3,
    offset=12_847,
    stage=Stage.PREPARED,
    worker_id="applier-1",
    code_version="0.1.0",
)
TIER = RetryAdvice(
    retryable=True, attempts_left=2, retry_after_s=5.0, strategy=RetryStrategy.NEXT_TIER
)


def detail(**overrides: Any) -> ErrorDetail:
    fields: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "code": StatusCode.ABORTED,
        "error_class": "DeadlockDetected",
        "message": "deadlock detected",
        "context": CONTEXT,
        "retry": TIER,
    }
    return ErrorDetail.create(**{**fields, **overrides})


def test_create_gives_every_failure_its_own_error_id() -> None:
    first, second = detail(), detail()

    assert first.error_id != second.error_id
    assert len(first.error_id) == 32
    int(first.error_id, 16)
    assert first.model_dump(exclude={"error_id"}) == second.model_dump(exclude={"error_id"})


def test_a_huge_message_with_nul_is_bounded_and_storable() -> None:
    made = detail(message="secret-free but long\x00" * 500)

    assert len(made.message) == MAX_ERROR_MESSAGE_LENGTH
    assert made.message.endswith(ELLIPSIS)
    assert "\x00" not in made.message
    assert "\\x00" in made.message


def test_building_without_create_refuses_an_unbounded_or_unstorable_message() -> None:
    fields = detail().model_dump()

    for message in ("x" * (MAX_ERROR_MESSAGE_LENGTH + 1), "nul\x00"):
        with pytest.raises(ValidationError):
            ErrorDetail.model_validate({**fields, "message": message})


def test_the_operation_keeps_the_summary_and_the_ids_that_find_the_failure() -> None:
    made = detail()

    assert made.error_info() == ErrorInfo(
        code=StatusCode.ABORTED,
        error_class="DeadlockDetected",
        message="deadlock detected",
        error_id=made.error_id,
        trace_id=made.trace_id,
    )


def test_it_round_trips_through_json_for_the_cli() -> None:
    made = detail()

    assert ErrorDetail.model_validate_json(made.model_dump_json()) == made


@pytest.mark.parametrize("trace_id", ["", "0" * 32, TRACE_ID.upper(), "abc"])
def test_an_invalid_trace_id_is_refused(trace_id: str) -> None:
    with pytest.raises(ValidationError):
        detail(trace_id=trace_id)


@pytest.mark.parametrize("strategy", list(RetryStrategy))
@pytest.mark.parametrize("retryable", [True, False])
def test_retry_advice_is_retryable_exactly_when_its_strategy_retries(
    strategy: RetryStrategy, retryable: bool
) -> None:
    consistent = retryable is (strategy in (RetryStrategy.IN_PLACE, RetryStrategy.NEXT_TIER))
    if consistent:
        assert RetryAdvice(retryable=retryable, strategy=strategy).strategy is strategy
    else:
        with pytest.raises(ValidationError, match="contradicts"):
            RetryAdvice(retryable=retryable, strategy=strategy)


@pytest.mark.parametrize(
    "change",
    [{"attempts_left": -1}, {"retry_after_s": -0.1}, {"retry_after_s": float("inf")}],
)
def test_retry_advice_refuses_negative_counts_and_delays(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RetryAdvice(**{**TIER.model_dump(), **change})


def test_context_outside_consumption_has_no_position() -> None:
    context = ErrorContext(worker_id="cli", code_version="0.1.0")

    assert (context.topic, context.partition, context.offset, context.stage) == (None,) * 4


def test_error_detail_of_an_exception_classifies_and_quotes_it() -> None:
    exc = GraphIngestError("neo4j said no\x00", code=StatusCode.UNAVAILABLE)

    made = error_detail(exc, trace_id=TRACE_ID, context=CONTEXT, retry=TIER)

    assert made.code is StatusCode.UNAVAILABLE
    assert made.error_class == "GraphIngestError"
    assert made.message == "neo4j said no\\x00"
    assert (made.trace_id, made.context, made.retry) == (TRACE_ID, CONTEXT, TIER)


def test_an_unexpected_exception_is_internal() -> None:
    made = error_detail(KeyError("k"), trace_id=TRACE_ID, context=CONTEXT, retry=TIER)

    assert (made.code, made.error_class) == (StatusCode.INTERNAL, "KeyError")
