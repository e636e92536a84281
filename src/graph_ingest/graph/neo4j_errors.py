"""The one edge where the neo4j driver's errors (and socket errors) become the graph package's:
the class and status code of each (DESIGN.md §5), the message naming the action that failed.

Apart from the writer so the mapping reads as one table and is unit-tested without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from neo4j import exceptions as neo4j_errors

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import (
    GraphError,
    GraphInternalError,
    GraphInvalidArgument,
    GraphPreconditionFailed,
    GraphTransactionAborted,
    GraphUnavailable,
)


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Translate driver and socket errors into the package's error tree, once, at this edge."""
    try:
        yield
    except GraphIngestError:
        raise
    except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, OSError) as exc:
        raise translate_error(exc, action) from exc


def translate_error(exc: BaseException, action: str) -> GraphIngestError:
    """The package error for a neo4j driver (or socket) error; see DESIGN.md §5 for the codes."""
    message = f"neo4j: {action} failed: {type(exc).__name__}: {_describe(exc)}"
    make = _classify(exc)
    return make(message)


def _classify(exc: BaseException) -> Callable[[str], GraphIngestError]:
    errors = neo4j_errors
    if isinstance(exc, errors.DatabaseUnavailable | errors.NotALeader):
        return GraphUnavailable
    if isinstance(exc, errors.Neo4jError) and _timed_out(exc.code or ""):
        return _with_code(StatusCode.DEADLINE_EXCEEDED)
    if isinstance(exc, errors.TransientError):
        # A transaction past the memory limit fails the same way every time: not contention.
        if "Memory" in (exc.code or ""):
            return _with_code(StatusCode.RESOURCE_EXHAUSTED)
        return GraphTransactionAborted
    if isinstance(exc, errors.AuthError):
        return _with_code(StatusCode.UNAUTHENTICATED)
    if isinstance(exc, errors.Forbidden):
        return _with_code(StatusCode.PERMISSION_DENIED)
    if isinstance(exc, errors.ClientError):
        return _client_error(exc.code or "")
    if isinstance(exc, errors.DatabaseError):
        return GraphInternalError
    if isinstance(
        exc,
        errors.ServiceUnavailable
        | errors.SessionExpired
        | errors.ConnectionAcquisitionTimeoutError
        | OSError,
    ):
        return GraphUnavailable
    if isinstance(exc, errors.ConfigurationError):
        return _with_code(StatusCode.FAILED_PRECONDITION)
    return GraphInternalError


def _timed_out(code: str) -> bool:
    """The transaction outlived its timeout: TransactionTimedOut* while it ran, LockClientStopped
    while it waited for a lock another transaction holds (an operator's TERMINATE or a shutdown
    ends a lock wait the same way; the probe before a plan is blamed tells those apart)."""
    return "TransactionTimedOut" in code or code.endswith(".LockClientStopped")


def _client_error(code: str) -> Callable[[str], GraphIngestError]:
    if code.startswith("Neo.ClientError.Transaction."):
        return GraphTransactionAborted
    if code.startswith(("Neo.ClientError.Statement.", "Neo.ClientError.Request.")):
        return GraphInvalidArgument
    return GraphPreconditionFailed  # Schema.* (constraints), Database.DatabaseNotFound, ...


def _with_code(code: StatusCode) -> Callable[[str], GraphIngestError]:
    def make(message: str) -> GraphIngestError:
        return GraphError(message, code=code)

    return make


def _describe(exc: BaseException) -> str:
    if isinstance(exc, neo4j_errors.Neo4jError):
        return f"{exc.code}: {exc.message}"
    return str(exc) or repr(exc)


__all__ = ["translate_error", "translated"]
