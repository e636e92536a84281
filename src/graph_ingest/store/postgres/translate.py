"""psycopg errors become ours here, once (DESIGN.md §5: translate at the adapter edge)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

import psycopg
from psycopg import errors as pg_errors

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.errors import StoreError, StoreUnavailable

P = ParamSpec("P")
R = TypeVar("R")


def translate(exc: psycopg.Error) -> GraphIngestError:
    """Map a psycopg error to the package's error tree (the caller raises it ``from exc``)."""
    detail = f"{type(exc).__name__}: {_first_line(exc)}"
    # Transaction rollbacks (serialization, deadlock) and lock timeouts subclass OperationalError:
    # test them first. They mean "this transaction lost a race": the same work may succeed again.
    if isinstance(
        exc,
        pg_errors.SerializationFailure
        | pg_errors.DeadlockDetected
        | pg_errors.TransactionRollback
        | pg_errors.LockNotAvailable,
    ):
        return StoreError(f"PostgreSQL aborted the transaction: {detail}", code=StatusCode.ABORTED)
    if isinstance(exc, pg_errors.QueryCanceled):  # statement_timeout, lock_timeout, cancel
        return StoreError(
            f"PostgreSQL statement timed out: {detail}", code=StatusCode.DEADLINE_EXCEEDED
        )
    # About us, not about the plan: privileges revoked, credentials refused.
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StoreError(f"PostgreSQL refused access: {detail}", code=StatusCode.PERMISSION_DENIED)
    if (getattr(exc, "sqlstate", None) or "").startswith("28"):  # invalid authorization
        return StoreError(
            f"PostgreSQL refused our credentials: {detail}", code=StatusCode.UNAUTHENTICATED
        )
    if isinstance(exc, pg_errors.OutOfMemory):
        # "out of shared memory": most often a transaction past the lock table (a batch that
        # takes more locks than max_locks_per_transaction allows). Not an outage to wait out in
        # place forever: the retry policy splits the batch, and blames a lone plan only if the
        # server answers a probe.
        return StoreError(
            f"PostgreSQL ran out of memory: {detail}", code=StatusCode.RESOURCE_EXHAUSTED
        )
    if isinstance(exc, pg_errors.ProgramLimitExceeded):
        # An index row or a statement past a server limit: the same input fails the same way.
        return StoreError(f"PostgreSQL limit exceeded: {detail}", code=StatusCode.INVALID_ARGUMENT)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        # Connection refused or lost, server shutting down, pool timeout (PoolTimeout subclasses
        # OperationalError).
        return StoreUnavailable(f"PostgreSQL unavailable: {detail}")
    if isinstance(exc, psycopg.IntegrityError):
        return StoreError(
            f"PostgreSQL constraint violated: {detail}", code=StatusCode.FAILED_PRECONDITION
        )
    if isinstance(exc, psycopg.DataError):
        # A value PostgreSQL cannot hold (NUL byte in text, integer out of range): retrying the
        # same value cannot help.
        return StoreError(
            f"PostgreSQL rejected a value: {detail}", code=StatusCode.INVALID_ARGUMENT
        )
    return StoreError(f"PostgreSQL error: {detail}", code=StatusCode.INTERNAL)


@contextmanager
def translating() -> Iterator[None]:
    """Re-raise any psycopg error inside the block as its translation."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc


def translated(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of :func:`translating`."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    return wrapper


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


__all__ = ["translate", "translated", "translating"]
