"""Every projection the projector folds, by topic: ``ingestion.operations`` into operation
statuses (``projections.tables``) and documents (``projections.document_table``), the DLQ topic
into DLQ entries, ``ingestion.degradation`` into worker degradation (``projections.keyed_tables``).

Each projection writes its rows and its positions in a transaction of its own, so each knows
how far it has folded; a partition is read again from the lowest position of the projections of
its topic (one that had folded further folds again, harmlessly: every fold is order-free).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from graph_ingest.kafka.records import Partition, Position
from graph_ingest.projections.degradation_rows import (
    DEGRADATION_TABLE,
    WORKER_DEGRADATION,
    degradation_values,
    worker_degradation,
)
from graph_ingest.projections.dlq_rows import DLQ_ENTRIES, DLQ_TABLE, entry_values, read_entry
from graph_ingest.projections.document_table import DOCUMENTS, fold_documents
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.keyed_tables import KeyedTable, fold_newest
from graph_ingest.projections.read_events import DegradationChange, DlqEvent, ReadEvent
from graph_ingest.projections.tables import OPERATION_STATUS, ReadTables
from graph_ingest.settings.kafka import TopicSettings

KeyedEvent = TypeVar("KeyedEvent", DlqEvent, DegradationChange)


def projections_by_topic(topics: TopicSettings) -> dict[str, tuple[str, ...]]:
    """Each topic the projector consumes -> the projections folded from it (the one list: the
    projector and ``projections rebuild`` read these topics)."""
    operations, dlq, degradation = topics.projected
    return {
        operations: (OPERATION_STATUS, DOCUMENTS),
        dlq: (DLQ_ENTRIES,),
        degradation: (WORKER_DEGRADATION,),
    }


class ReadFolds:
    """The folds of one read schema (``ReadTables``, started) for the topics of ``topics``."""

    def __init__(self, tables: ReadTables, topics: TopicSettings) -> None:
        self._tables = tables
        self._requests_topic = topics.requests
        self.projections = projections_by_topic(topics)

    @property
    def topics(self) -> list[str]:
        return list(self.projections)

    def positions(self, partitions: Collection[Partition]) -> dict[Partition, int]:
        """The offset of each of ``partitions`` that every projection of its topic has folded
        up to (a partition one of them has not folded at all is left out)."""
        folded: dict[Partition, int] = {}
        for topic, names in self.projections.items():
            mine = [p for p in partitions if p[0] == topic]
            stored = [self._tables.positions(name, mine) for name in names]
            for partition in mine:
                if all(partition in each for each in stored):
                    folded[partition] = min(each[partition] for each in stored)
        return folded

    def fold(self, events: Sequence[ReadEvent]) -> dict[Position, str]:
        """Fold ``events`` into every projection of their topics; each event's outcome (the
        operation status's verdict, for an operation event)."""
        operations = [e for e in events if isinstance(e, OperationEvent)]
        dead_letters = [e for e in events if isinstance(e, DlqEvent)]
        changes = [e for e in events if isinstance(e, DegradationChange)]
        outcomes: dict[Position, str] = {}
        if operations:
            outcomes |= fold_documents(self._tables, operations)
            outcomes |= self._tables.fold(operations)
        outcomes |= self._fold_keyed(DLQ_TABLE, dead_letters, self._entry_values)
        outcomes |= self._fold_keyed(DEGRADATION_TABLE, changes, _degradation_values)
        return outcomes

    def _entry_values(self, event: DlqEvent) -> dict[str, Any] | None:
        entry = read_entry(event, self._requests_topic)
        return None if entry is None else entry_values(entry)

    def _fold_keyed(
        self,
        table: KeyedTable,
        events: Sequence[KeyedEvent],
        values_of: Callable[[KeyedEvent], dict[str, Any] | None],
    ) -> dict[Position, str]:
        """Fold ``events`` into ``table``: the newest row per key (``values_of`` an event; None
        for one without a row)."""
        if not events:
            return {}
        rows = [(event, values) for event in events if (values := values_of(event)) is not None]
        return fold_newest(self._tables, table, events, rows)


def _degradation_values(change: DegradationChange) -> dict[str, Any] | None:
    row = worker_degradation(change)
    return None if row is None else degradation_values(row)


__all__ = ["ReadFolds"]
