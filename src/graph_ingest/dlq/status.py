"""Changing an entry's status (REPLAYED, RESOLVED): the row and the DLQ topic, in one transaction.

The new envelope goes to the DLQ topic through the outbox, in the transaction that writes the
index row, as routing does: the topic's newest message of every key is then always the row, and
``dlq reindex`` rebuilds the rows from it. (Producing it directly would leave the two apart
whenever the process died between the commit and the produce, or the produce failed.)
"""

from __future__ import annotations

from collections.abc import Callable

from graph_ingest.dlq.entries import with_status
from graph_ingest.dlq.errors import DlqEntryNotFound
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.limits import MAX_ERROR_MESSAGE_LENGTH, bounded_text
from graph_ingest.schemas.messages import dlq_message
from graph_ingest.store.base import OperationStore
from graph_ingest.store.dlq_index import DlqEntry

MAX_NOTE_LENGTH = MAX_ERROR_MESSAGE_LENGTH
"""A note (a purge's reason) is cut there, the cut marked, like an error message."""


def _accept(entry: DlqEntry) -> None:
    return None


def set_status(
    store: OperationStore,
    dlq_topic: str,
    dlq_id: str,
    status: DlqStatus,
    note: str,
    *,
    seen: DlqEntry | None = None,
    check: Callable[[DlqEntry], None] = _accept,
) -> DlqEntry | None:
    """Give entry ``dlq_id`` ``status`` with ``note``: its row and its newest envelope on the DLQ
    topic (an outbox row), in one transaction, the row locked. ``check`` may refuse (raise) on
    the locked row. With ``seen``: only if the entry is still that envelope, else None and
    nothing written (it changed meanwhile: a replay that already failed again, another
    operator). Raises DlqEntryNotFound for an unknown id. The note is cut to MAX_NOTE_LENGTH."""
    with store.unit_of_work() as uow:
        current = uow.dlq_entries([dlq_id]).get(dlq_id)
        if current is None:
            raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
        if seen is not None and current.envelope != seen.envelope:
            return None
        check(current)
        changed = with_status(current, status, bounded_text(note, MAX_NOTE_LENGTH))
        uow.put_dlq_entries([changed])
        uow.enqueue([dlq_message(dlq_topic, changed)])
    return changed


__all__ = ["MAX_NOTE_LENGTH", "set_status"]
