"""The outbox port: messages written in the transaction that decided them, published later.

Writers (``OutboxWriter``, inside a unit of work) append rows; the relay (``producers/relay.py``)
drains them to Kafka through an ``OutboxFeed``: its own session, one active relay per schema by a
session lock, the oldest unpublished rows first, marked published once Kafka has them, and
deleted once they have been published for the retention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from graph_ingest.schemas.messages import OutboxMessage


class OutboxWriter(Protocol):
    """The outbox side of a unit of work."""

    def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        """Append raw messages to the outbox (e.g. re-publishing a released plan)."""

    def newest_outbox_values(self, topic: str, since: datetime) -> dict[bytes, bytes]:
        """Per message key, the value of the newest outbox row for ``topic`` that was not
        published before ``since`` (the database's clock): unpublished, or published at or after
        it. A reader of ``topic`` that started after ``since`` may have missed those."""


class OutboxRow(NamedTuple):
    """One unpublished outbox row, as stored (the relay turns it into a Kafka message)."""

    id: int
    topic: str
    message_key: bytes | None
    message_value: bytes
    headers: Mapping[str, Any] | None
    operation_id: str | None
    sequence: int | None
    created_at: datetime | None = None
    """When the row was written (its transaction's time)."""


class OutboxFeed(Protocol):
    """The relay's own session on the outbox. A call that fails raises a StoreError; the relay
    then closes the session, and with it gives up the lock, and opens a fresh one next round."""

    @property
    def is_open(self) -> bool:
        """True while the session is open (and so still holds the lock it took)."""

    def open(self) -> None:
        """Open the session (it holds no lock yet)."""

    def close(self) -> None:
        """Close the session, which releases the relay lock (idempotent)."""

    def try_lock(self, key: int) -> bool:
        """Take the session-level relay lock ``key`` without waiting; False if another holds it."""

    def unpublished(self, limit: int) -> list[OutboxRow]:
        """The oldest (by id) at most ``limit`` rows not published yet."""

    def mark_published(self, ids: Sequence[int]) -> int:
        """Mark these rows published now; returns how many were not marked already."""

    def unpublished_count(self) -> int:
        """How many rows wait to be published (on a short session of its own if none is open)."""


class OutboxSignal(Protocol):
    """Word of committed outbox rows, on the feed's session (the relay's idle wait)."""

    def wait_for_rows(self, timeout_s: float, wake: int | None = None) -> bool:
        """Wait until rows are committed to the outbox, at most ``timeout_s``: True when told of
        new rows (there may be none left by then), False when the time ran out or the file
        descriptor ``wake`` became readable (another thread ends the wait: ``waiting.Bell``). A
        StoreError when the session fails (the relay then drops it, as for the feed's calls)."""


class OutboxRetention(Protocol):
    """Deleting published rows, on the feed's session (the active relay's purge)."""

    def purge_published(self, older_than_s: float, limit: int) -> int:
        """Delete at most ``limit`` of the rows published more than ``older_than_s`` seconds ago
        (by the database's clock), the longest published first; returns how many."""


__all__ = ["OutboxFeed", "OutboxRetention", "OutboxRow", "OutboxSignal", "OutboxWriter"]
