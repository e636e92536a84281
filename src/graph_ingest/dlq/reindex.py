"""`dlq reindex`: rebuild the DLQ index from the DLQ topic, the newest envelope of every key.

The topic is read from its beginning to its end by a reader of its own (no consumer group). The
index is then replaced in one transaction that holds every other writer of it off; the DLQ
messages of the outbox that were not published before the read started are laid over what was
read, newest per key: they are newer than anything of their key on the topic (the relay
publishes in outbox order), and the read may have missed them. The rows are then exactly what
the topic holds once the relay has caught up, whatever was dead-lettered, replayed or purged
during the rebuild.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from graph_ingest.dlq.entries import entry_of
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.kafka.reader import read_to_end
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReindexReport:
    topic: str
    messages: int
    """DLQ-topic messages read."""
    from_outbox: int
    """Entries whose newest envelope was still in the outbox (not yet, or just, published)."""
    undecodable: int
    """Keys whose newest message is no envelope (left out of the index)."""
    rows_before: int
    by_status: dict[DlqStatus, int]

    @property
    def entries(self) -> int:
        return sum(self.by_status.values())


def reindex(store: OperationStore, settings: Settings) -> ReindexReport:
    topic = settings.topics.dlq
    since = store.database_time()
    records = read_to_end(settings.kafka, topic, timeout_s=settings.dlq.reindex_timeout_s)
    newest: dict[bytes, bytes] = {}
    for record in records:  # a key's messages share a partition, in offset order
        if record.key is not None and record.value is not None:
            newest[record.key] = record.value
    rows_before = store.count_dlq_entries(DlqQuery())
    with store.unit_of_work() as uow:
        uow.lock_dlq_index()
        pending = uow.newest_outbox_values(topic, since)
        entries, undecodable = _entries({**newest, **pending})
        uow.replace_dlq_entries(entries)
    statuses = Counter(e.status for e in entries)
    report = ReindexReport(
        topic=topic,
        messages=len(records),
        from_outbox=sum(newest.get(key) != value for key, value in pending.items()),
        undecodable=undecodable,
        rows_before=rows_before,
        by_status={status: statuses[status] for status in DlqStatus},
    )
    log.info(
        "dlq reindex: %d messages of %s -> %d entries (%d from the outbox, %d undecodable)",
        report.messages,
        topic,
        report.entries,
        report.from_outbox,
        report.undecodable,
    )
    return report


def _entries(newest: dict[bytes, bytes]) -> tuple[list[DlqEntry], int]:
    entries: list[DlqEntry] = []
    undecodable = 0
    for key, value in newest.items():
        try:
            dlq_id = key.decode("utf-8")
            entries.append(entry_of(dlq_id, decode_dlq_envelope(value), encoded=value))
        except (UnicodeDecodeError, GraphIngestError) as exc:
            undecodable += 1
            log.warning("dlq reindex: key %r holds no envelope (%s): left out", key[:80], exc)
    return entries, undecodable


__all__ = ["ReindexReport", "reindex"]
