"""The DLQ index port: one row per dead-lettered message, what operators filter and page on.

The DLQ topic holds the envelopes; the index holds the newest envelope of each entry with its
status (pending review, replayed, resolved), so ``dlq list``, ``replay`` and ``purge`` never scan
the topic. Routing, replay and purge write it inside their unit of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode


@dataclass(frozen=True, slots=True)
class DlqEntry:
    """One row of the DLQ index: the newest envelope of ``dlq_id`` and what is filtered on."""

    dlq_id: str
    status: DlqStatus
    operation_id: str | None
    fingerprint: str | None
    space: str | None
    document_id: str | None
    code: StatusCode
    error_class: str
    message: str
    parked_behind: str | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    attempts: int
    dead_lettered_at: datetime
    envelope: bytes
    """The encoded envelope (``schemas/dlq_envelope``)."""


@dataclass(frozen=True, slots=True)
class DlqQuery:
    """Which DLQ entries to read, oldest (``dead_lettered_at``, then ``dlq_id``) first. A filter
    left None matches every entry."""

    status: DlqStatus | None = None
    code: StatusCode | None = None
    error_class: str | None = None
    """Only entries whose last failure was this exception class (``DlqEntry.error_class``)."""
    space: str | None = None
    document_id: str | None = None
    older_than_s: float | None = None
    """Only entries dead-lettered at least this long ago (by the database's clock)."""
    limit: int | None = None
    after: tuple[datetime, str] | None = None
    """Keyset paging: only entries after this (``dead_lettered_at``, ``dlq_id``)."""


@dataclass(frozen=True, slots=True)
class DlqCount:
    """How many entries have one (code, status), and how old the oldest of them is."""

    code: StatusCode
    status: DlqStatus
    entries: int
    oldest_age_s: float


@dataclass(frozen=True, slots=True)
class DlqStats:
    counts: tuple[DlqCount, ...]
    """One per (code, status) that has entries, ordered by code then status."""

    @property
    def total(self) -> int:
        return sum(c.entries for c in self.counts)

    def by_status(self) -> dict[DlqStatus, int]:
        """Every status, with 0 for those without entries."""
        return {s: sum(c.entries for c in self.counts if c.status is s) for s in DlqStatus}

    def by_code(self) -> dict[StatusCode, int]:
        """The codes that have entries."""
        found: dict[StatusCode, int] = {}
        for c in self.counts:
            found[c.code] = found.get(c.code, 0) + c.entries
        return found

    @property
    def oldest_pending_age_s(self) -> float | None:
        """How long the oldest entry waiting for review has waited; None when none waits."""
        ages = [c.oldest_age_s for c in self.counts if c.status is DlqStatus.PENDING_REVIEW]
        return max(ages, default=None)


class DlqIndexWriter(Protocol):
    """The DLQ index side of a unit of work."""

    def dlq_entries(self, dlq_ids: Sequence[str]) -> dict[str, DlqEntry]:
        """The DLQ index rows that exist, locked (FOR UPDATE), keyed by id."""

    def put_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        """Insert or replace DLQ index rows."""

    def lock_dlq_index(self) -> None:
        """Keep every other writer of the DLQ index (routing, replay, purge) waiting until this
        transaction ends (``dlq reindex`` replacing the rows)."""

    def replace_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        """Make ``entries`` the whole DLQ index: every other row is deleted."""


class DlqIndexReader(Protocol):
    """The DLQ index read outside a unit of work (each call its own short read)."""

    def list_dlq_entries(self, query: DlqQuery) -> list[DlqEntry]:
        """The entries ``query`` selects, oldest first, at most ``query.limit``."""
        ...

    def count_dlq_entries(self, query: DlqQuery) -> int:
        """How many entries ``query`` selects, its ``limit`` aside."""
        ...

    def get_dlq_entry(self, dlq_id: str) -> DlqEntry | None: ...

    def dlq_stats(self) -> DlqStats: ...


__all__ = ["DlqCount", "DlqEntry", "DlqIndexReader", "DlqIndexWriter", "DlqQuery", "DlqStats"]
