"""Driver errors become ours at the store's edge; the store never connects before start()."""

from __future__ import annotations

import socket

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from graph_ingest.domain.errors import DependencyUnavailable
from graph_ingest.domain.status import StatusCode
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.errors import StoreError, StoreUnavailable
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.store.postgres.translate import translate, translated


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (pg_errors.SerializationFailure("could not serialize"), StatusCode.ABORTED),
        (pg_errors.DeadlockDetected("deadlock detected"), StatusCode.ABORTED),
        (pg_errors.LockNotAvailable("lock timeout"), StatusCode.ABORTED),
        (pg_errors.QueryCanceled("statement timeout"), StatusCode.DEADLINE_EXCEEDED),
        (psycopg.OperationalError("connection refused"), StatusCode.UNAVAILABLE),
        (pg_errors.AdminShutdown("terminating connection"), StatusCode.UNAVAILABLE),
        (PoolTimeout("couldn't get a connection"), StatusCode.UNAVAILABLE),
        (pg_errors.UniqueViolation("duplicate key"), StatusCode.FAILED_PRECONDITION),
        (pg_errors.CheckViolation("check"), StatusCode.FAILED_PRECONDITION),
        (pg_errors.NumericValueOutOfRange("out of range"), StatusCode.INVALID_ARGUMENT),
        (pg_errors.UntranslatableCharacter("\\u0000"), StatusCode.INVALID_ARGUMENT),
        (pg_errors.ProgramLimitExceeded("index row size"), StatusCode.INVALID_ARGUMENT),
        (pg_errors.OutOfMemory("out of shared memory"), StatusCode.RESOURCE_EXHAUSTED),
        (pg_errors.InsufficientPrivilege("permission denied"), StatusCode.PERMISSION_DENIED),
        (pg_errors.InvalidPassword("password authentication"), StatusCode.UNAUTHENTICATED),
        (pg_errors.UndefinedTable("relation does not exist"), StatusCode.INTERNAL),
        (psycopg.ProgrammingError("bad query"), StatusCode.INTERNAL),
    ],
)
def test_translate_maps_driver_errors_to_codes(error: psycopg.Error, code: StatusCode) -> None:
    translated_error = translate(error)
    assert isinstance(translated_error, StoreError)
    assert translated_error.code is code
    assert type(error).__name__ in str(translated_error)


def test_unavailable_is_both_a_store_error_and_a_dependency_outage() -> None:
    error = translate(psycopg.OperationalError("gone"))
    assert isinstance(error, StoreUnavailable)
    assert isinstance(error, DependencyUnavailable)


def test_decorator_chains_the_driver_error() -> None:
    cause = pg_errors.DeadlockDetected("deadlock detected\nDETAIL: secrets stay out")

    @translated
    def fails() -> None:
        raise cause

    with pytest.raises(StoreError) as raised:
        fails()
    assert raised.value.__cause__ is cause
    assert "DETAIL" not in str(raised.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _store(settings: PostgresSettings) -> PostgresOperationStore:
    return PostgresOperationStore(settings, event_encoder=lambda op: b"", operations_topic="t")


@pytest.mark.timeout(30)
def test_start_against_nothing_listening_is_unavailable() -> None:
    store = _store(PostgresSettings(port=_free_port(), connect_timeout_s=1))  # constructing: no I/O
    with pytest.raises(DependencyUnavailable) as raised:
        store.start()
    assert raised.value.code is StatusCode.UNAVAILABLE


def test_using_the_store_before_start_is_a_precondition_failure() -> None:
    store = _store(PostgresSettings())
    with pytest.raises(StoreError) as raised, store.unit_of_work():
        pass
    assert raised.value.code is StatusCode.FAILED_PRECONDITION
    with pytest.raises(StoreError):
        store.get_operation("op")
    store.close()  # closing an unstarted store is harmless
