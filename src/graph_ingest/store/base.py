"""The bookkeeping store's contract, composed of one small port per concern.

The applier decides (domain logic); the store only reads and writes, inside one transaction per
``unit_of_work()``. Every call takes a list so a batch of plans costs one round of statements.
``UnitOfWork`` is every write port in one transaction; ``OperationStore`` every read port plus
the lifecycle. A caller that needs one concern types against that port (``store/<concern>.py``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from graph_ingest.store.dlq_index import DlqIndexReader, DlqIndexWriter
from graph_ingest.store.documents import DocumentReader, DocumentWriter
from graph_ingest.store.failures import FailureLog
from graph_ingest.store.operations import OperationReader, OperationWriter
from graph_ingest.store.outbox import OutboxWriter
from graph_ingest.store.parking import ParkedOperations
from graph_ingest.store.plan_claims import PlanClaimReader, PlanClaimWriter
from graph_ingest.store.registry import RegistryReader, RegistryWriter
from graph_ingest.store.submissions import PlannerRecordReader, PlannerRecordWriter


class UnitOfWork(
    OperationWriter,
    DocumentWriter,
    RegistryWriter,
    ParkedOperations,
    OutboxWriter,
    FailureLog,
    DlqIndexWriter,
    PlannerRecordWriter,
    PlanClaimWriter,
    Protocol,
):
    """One PostgreSQL transaction. Leaving the ``with`` block commits; an exception rolls back."""


class OperationStore(
    OperationReader,
    DocumentReader,
    RegistryReader,
    DlqIndexReader,
    PlannerRecordReader,
    PlanClaimReader,
    Protocol,
):
    def start(self) -> None: ...

    def close(self) -> None: ...

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def probe(self) -> None:
        """Raise (a StoreError with its code) unless the store answers a trivial transaction."""

    def database_time(self) -> datetime:
        """The database's clock now: the clock of ``older_than_s`` filters and outbox marks."""
        ...


__all__ = ["OperationStore", "UnitOfWork"]
