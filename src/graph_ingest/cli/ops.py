"""`graph-ingest ops list`: operations from the read tables, filtered and paged; and the read
service as the commands open it (``status``, ``ops``, ``submit --wait``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from graph_ingest.settings import Settings

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.projections.operation_views import StatusViews
    from graph_ingest.projections.queries import OperationQueries
    from graph_ingest.store.base import OperationStore


@contextmanager
def read_service(settings: Settings) -> Iterator[tuple[OperationQueries, OperationStore]]:
    """The read service over the read tables, and the write side's store it reads committed
    sequences from, both started for the block."""
    from graph_ingest.projections.queries import OperationQueries
    from graph_ingest.projections.tables import ReadTables
    from graph_ingest.wiring import postgres_store

    store = postgres_store(settings)
    tables = ReadTables(settings.postgres)
    store.start()
    try:
        tables.start()
        try:
            yield OperationQueries(tables, committed=store), store
        finally:
            tables.close()
    finally:
        store.close()


@contextmanager
def status_views(settings: Settings) -> Iterator[StatusViews]:
    """The status views over the read service and the write side's readers (``status``)."""
    from graph_ingest.projections.operation_views import StatusViews

    with read_service(settings) as (queries, store):
        yield StatusViews(queries, store)
