"""The structured detail of one failure: what every failure record carries (seed 002 §1.2).

The operation's last error, each attempt of the DLQ envelope's history and the CLI's ``--json``
output are built from an :class:`ErrorDetail`. Its message is bounded and storable (see
:func:`~graph_ingest.domain.limits.bounded_text`); it quotes the exception, so adapters must
build exception messages without document text or secrets (the codec's validation messages leave
input values out for that reason) — nothing here can recognise a secret.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from graph_ingest.domain.limits import ErrorClass, ErrorMessage, Offset, StoredText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import TraceId

# An error id names one failure event, not an application identity: random is right here.
ErrorId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


def new_error_id() -> str:
    return uuid.uuid4().hex


class RetryStrategy(StrEnum):
    IN_PLACE = "IN_PLACE"
    """Tried again where it is, partitions paused, behind the circuit breaker (an outage)."""
    NEXT_TIER = "NEXT_TIER"
    """Copied to the next retry tier, tried again when it is due."""
    DEAD_LETTER = "DEAD_LETTER"
    """Sent to the DLQ for review; only a replay tries it again."""
    NONE = "NONE"
    """Not routed: the failure ends where it happened (a CLI command, a plan that needs a replan)."""

    @property
    def retries(self) -> bool:
        return self in (RetryStrategy.IN_PLACE, RetryStrategy.NEXT_TIER)


class RetryAdvice(FrozenModel):
    retryable: bool
    attempts_left: int | None = Field(
        default=None, ge=0, description="None when unbounded (an outage is waited out)"
    )
    retry_after_s: float | None = Field(
        default=None, ge=0, description="None when the retrier decides (backoff, breaker)"
    )
    strategy: RetryStrategy

    @model_validator(mode="after")
    def _retryable_matches_strategy(self) -> RetryAdvice:
        if self.retryable is not self.strategy.retries:
            raise ValueError(f"retryable={self.retryable} contradicts strategy {self.strategy}")
        return self


class ErrorContext(FrozenModel):
    """Where the failure happened. Topic, partition and offset are None outside consumption."""

    topic: StoredText | None = None
    partition: int | None = Field(default=None, ge=0)
    offset: Offset | None = None
    stage: Stage | None = Field(
        default=None, description="the operation's stage; None before an operation exists"
    )
    worker_id: StoredText
    code_version: StoredText


class ErrorDetail(FrozenModel):
    error_id: ErrorId
    trace_id: TraceId
    code: StatusCode
    error_class: ErrorClass
    message: ErrorMessage
    context: ErrorContext
    retry: RetryAdvice

    @classmethod
    def create(
        cls,
        *,
        trace_id: str,
        code: StatusCode,
        error_class: str,
        message: str,
        context: ErrorContext,
        retry: RetryAdvice,
    ) -> ErrorDetail:
        """A new failure event: a fresh error id, class and message bounded and made storable."""
        quoted = ErrorInfo.quoting(code, error_class, message)
        return cls(
            error_id=new_error_id(),
            trace_id=trace_id,
            code=quoted.code,
            error_class=quoted.error_class,
            message=quoted.message,
            context=context,
            retry=retry,
        )

    def error_info(self) -> ErrorInfo:
        """The summary ``Operation.last_error`` holds: the error, and the ids that find it."""
        return ErrorInfo(
            code=self.code,
            error_class=self.error_class,
            message=self.message,
            error_id=self.error_id,
            trace_id=self.trace_id,
        )
