"""A failure as it is shown: one value per failure record, whichever record it came from (an
operation's last error, a failure the applier routed, an attempt of a DLQ envelope, a DLQ entry).

`graph-ingest status` and `graph-ingest dlq show` format their text from these views, and the
HTTP API can return them as they are (plain dataclasses: ``dataclasses.asdict``), so a failure
reads the same wherever it is shown: ``CODE ErrorClass: message``, its attempt, its retry tier
("main" until it is routed to one), when and where it happened and its trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from graph_ingest.domain.dlq import AttemptRecord
from graph_ingest.domain.error_detail import ErrorDetail
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode


@dataclass(frozen=True, slots=True)
class FailureView:
    """What failed, and how: the status code, the error's class and its (bounded) message."""

    code: StatusCode
    error_class: str
    message: str

    @classmethod
    def of_error(cls, error: ErrorInfo | ErrorDetail) -> FailureView:
        return cls(code=error.code, error_class=error.error_class, message=error.message)

    @property
    def headline(self) -> str:
        """The failure in one line: ``INTERNAL ValueError: bad value``."""
        return f"{self.code} {self.error_class}: {self.message}"


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One failed attempt: its failure, which attempt it was, where (``tier`` None: the main
    topic), when, on which worker and trace; ``routed_to`` and ``error_id`` where known."""

    failure: FailureView
    attempt: int
    tier: int | None
    at: datetime
    trace_id: str
    worker_id: str
    code_version: str
    routed_to: str | None = None
    error_id: str | None = None

    @classmethod
    def of_routed(
        cls, detail: ErrorDetail, *, attempt: int, tier: int | None, at: datetime, routed_to: str
    ) -> AttemptView:
        """A failure the applier routed to a retry tier or the DLQ."""
        return cls(
            failure=FailureView.of_error(detail),
            attempt=attempt,
            tier=tier,
            at=at,
            trace_id=detail.trace_id,
            worker_id=detail.context.worker_id,
            code_version=detail.context.code_version,
            routed_to=routed_to,
            error_id=detail.error_id,
        )

    @classmethod
    def of_record(cls, record: AttemptRecord) -> AttemptView:
        """An attempt of a DLQ envelope's history."""
        return cls(
            failure=FailureView(record.code, record.error_class, record.message),
            attempt=record.attempt,
            tier=record.tier,
            at=record.at,
            trace_id=record.trace_id,
            worker_id=record.worker_id,
            code_version=record.code_version,
        )

    def where(self, main: str = "main") -> str:
        """``tier 2``, or ``main`` (as the caller names it) for the main topic."""
        return main if self.tier is None else f"tier {self.tier}"


__all__ = ["AttemptView", "FailureView"]
