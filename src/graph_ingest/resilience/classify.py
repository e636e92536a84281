"""Classify once: every exception becomes a status code; retry advice follows from the code."""

from pydantic import ValidationError

from graph_ingest.domain.error_detail import ErrorContext, ErrorDetail, RetryAdvice
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode


def classify(exc: BaseException) -> StatusCode:
    """Adapters translate driver errors into GraphIngestError; anything else is a bug (INTERNAL)."""
    if isinstance(exc, GraphIngestError):
        return exc.code
    if isinstance(exc, ValidationError):
        return StatusCode.INVALID_ARGUMENT
    return StatusCode.INTERNAL


def dependency_of(exc: BaseException) -> str | None:
    """The service an error is about: the first adapter error in ``exc`` and its causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, GraphIngestError) and seen.dependency is not None:
            return seen.dependency
        seen = seen.__cause__
    return None


def error_info(exc: BaseException) -> ErrorInfo:
    return ErrorInfo.quoting(classify(exc), type(exc).__name__, str(exc))


def error_detail(
    exc: BaseException, *, trace_id: str, context: ErrorContext, retry: RetryAdvice
) -> ErrorDetail:
    """The failure record of ``exc``: its code, class and bounded message, where and what next."""
    return ErrorDetail.create(
        trace_id=trace_id,
        code=classify(exc),
        error_class=type(exc).__name__,
        message=str(exc),
        context=context,
        retry=retry,
    )


DEADLOCK = "deadlock"
LOCK_WAIT = "lock_wait"
_DEADLOCKS = ("DeadlockDetected",)
"""psycopg's class (SQLSTATE 40P01), and the tail of Neo4j's Neo.TransientError.Transaction.*"""
_LOCK_WAITS = ("LockNotAvailable", "LockAcquisitionTimeout", "LockClientStopped")
"""psycopg's SQLSTATE 55P03 (lock_timeout, NOWAIT), and Neo4j's lock waits cut off."""


def retry_reason(exc: BaseException) -> str:
    """Why a batch is retried in place, for counting: ``deadlock`` and ``lock_wait`` (contention
    on hot entities, told apart by the driver error behind ours), else the status code in lower
    case. Reads names only (the driver's class, Neo4j's ``code``, the names our translations
    quote in their messages), so it imports no driver."""
    seen: BaseException | None = exc
    while seen is not None:
        said = f"{type(seen).__name__} {getattr(seen, 'code', '') or ''} {seen}"
        if any(name in said for name in _DEADLOCKS):
            return DEADLOCK
        if any(name in said for name in _LOCK_WAITS) or "lock timeout" in said:
            return LOCK_WAIT
        seen = seen.__cause__
    return classify(exc).value.lower()
