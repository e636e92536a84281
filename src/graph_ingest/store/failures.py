"""The failure log port: every failure the applier routed to a retry tier or the DLQ.

One row per consumed message that failed, keyed by its position, so that a redelivery after a
crash before the offset commit is recognised and not routed twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from graph_ingest.domain.error_detail import ErrorDetail


@dataclass(frozen=True, slots=True)
class FailureAttempt:
    """A failure the applier routed to a retry tier or the DLQ (one per consumed message)."""

    source: tuple[str, int, int] | None
    """(topic, partition, offset) of the message that failed; None for a plan that followed
    another to the DLQ without being consumed."""
    operation_id: str | None
    attempt: int
    tier: int | None
    routed_to: str
    at: datetime
    detail: ErrorDetail


class FailureLog(Protocol):
    """The failure log, inside a unit of work."""

    def routed_sources(
        self, positions: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], str]:
        """Of these consumed positions, those whose failure was already routed (a redelivery
        after a crash before the offset commit), with where they went (``routed_to``)."""
        ...

    def record_failure(self, attempt: FailureAttempt) -> bool:
        """Record a routed failure; False (nothing written) when its source message was routed
        already: a redelivery after a crash before the offset commit."""

    def failure_history(self, operation_id: str) -> list[FailureAttempt]:
        """The routed failures of an operation, oldest first."""


__all__ = ["FailureAttempt", "FailureLog"]
