"""The backlog port: what waits in the store at a glance — the DLQ index by status and code, the
outbox not yet published, the operations parked behind an earlier version — for the gauges a
Prometheus scrape reads (``observability.store_gauges``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class StoreBacklog:
    """One consistent look at the store (one statement, one snapshot)."""

    dlq_entries: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """Rows of the DLQ index per (status, code), as stored (``DlqStatus``, ``StatusCode``
    values); only the pairs that have rows."""
    oldest_pending_dlq_at: float | None = None
    """Unix time the oldest entry pending review was dead-lettered; None when none is pending."""
    outbox_rows: int = 0
    """Outbox rows not published yet."""
    outbox_oldest_age_s: float = 0.0
    """How long the oldest of them has waited, by the database's clock (0 when none waits)."""
    parked_operations: int = 0
    """Operations PARKED behind an earlier version of their document."""


class BacklogReader(Protocol):
    """Reads the backlog; a failure raises a ``StoreError`` (``StoreUnavailable`` when the
    database cannot be reached in time)."""

    def backlog(self) -> StoreBacklog: ...

    def close(self) -> None:
        """Let go of the connection (the next read opens one)."""


__all__ = ["BacklogReader", "StoreBacklog"]
