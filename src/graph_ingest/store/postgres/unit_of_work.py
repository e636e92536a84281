"""The PostgreSQL unit of work: every write port's mixin on one connection and one transaction."""

from __future__ import annotations

from graph_ingest.store.postgres.dlq_index import PostgresDlqIndexWriter
from graph_ingest.store.postgres.documents import PostgresDocumentWriter
from graph_ingest.store.postgres.failures import PostgresFailureLog
from graph_ingest.store.postgres.operations import PostgresOperationWriter
from graph_ingest.store.postgres.outbox import PostgresOutboxWriter
from graph_ingest.store.postgres.parking import PostgresParkedOperations
from graph_ingest.store.postgres.plan_claims import PostgresPlanClaimWriter
from graph_ingest.store.postgres.registry import PostgresRegistryWriter
from graph_ingest.store.postgres.submissions import PostgresPlannerRecordWriter


class PostgresUnitOfWork(
    PostgresOperationWriter,
    PostgresDocumentWriter,
    PostgresRegistryWriter,
    PostgresParkedOperations,
    PostgresOutboxWriter,
    PostgresFailureLog,
    PostgresDlqIndexWriter,
    PostgresPlannerRecordWriter,
    PostgresPlanClaimWriter,
):
    """Implements ``UnitOfWork`` on a connection whose transaction the store opens and ends.

    Each method costs one statement for the whole list (two for ``commit_document_states`` when
    there are fact sources; the registry adds a lock and a check). Methods that raise leave
    nothing of their own call written: their writes run inside a savepoint.
    """


__all__ = ["PostgresUnitOfWork"]
