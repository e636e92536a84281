"""The store's errors: the tree every store adapter raises, whatever the database.

Callers (the applier's retry policy, the planner, the CLI) catch these, never a driver's errors:
the PostgreSQL adapter translates psycopg's once, in ``store/postgres/translate.py``.
"""

from __future__ import annotations

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.status import StatusCode


class StoreError(GraphIngestError):
    """Raised by store adapters; driver errors are translated into this tree (with a code)."""

    dependency = "postgres"


class RegistryConflict(StoreError):
    """A registration would reassign a name to another node, or change a node's type.

    It rejects the whole batch of registrations it came in (the applier then splits the batch to
    find the plan that carries it).
    """

    code = StatusCode.FAILED_PRECONDITION


class StoreUnavailable(StoreError, DependencyUnavailable):
    """PostgreSQL could not be reached, dropped the connection, or no pooled connection was free."""

    code = StatusCode.UNAVAILABLE


__all__ = ["RegistryConflict", "StoreError", "StoreUnavailable"]
