"""Neo4j driver errors translate to our status codes once, at the adapter edge (no server)."""

import neo4j
import pytest

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.neo4j_errors import translate_error


def _server_error(code: str) -> neo4j.exceptions.Neo4jError:
    # The driver's own factory for server failures (no public constructor takes a code).
    return neo4j.exceptions.Neo4jError._hydrate_neo4j(code=code, message="m")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (neo4j.exceptions.ServiceUnavailable("down"), StatusCode.UNAVAILABLE),
        (neo4j.exceptions.SessionExpired("gone"), StatusCode.UNAVAILABLE),
        (neo4j.exceptions.IncompleteCommit("unknown outcome"), StatusCode.UNAVAILABLE),
        (ConnectionRefusedError(111, "refused"), StatusCode.UNAVAILABLE),
        (_server_error("Neo.TransientError.Transaction.DeadlockDetected"), StatusCode.ABORTED),
        (
            _server_error("Neo.TransientError.General.MemoryPoolOutOfMemoryError"),
            StatusCode.RESOURCE_EXHAUSTED,
        ),
        (_server_error("Neo.TransientError.General.DatabaseUnavailable"), StatusCode.UNAVAILABLE),
        (
            _server_error("Neo.ClientError.Schema.ConstraintValidationFailed"),
            StatusCode.FAILED_PRECONDITION,
        ),
        (
            _server_error("Neo.ClientError.Database.DatabaseNotFound"),
            StatusCode.FAILED_PRECONDITION,
        ),
        (_server_error("Neo.ClientError.Statement.TypeError"), StatusCode.INVALID_ARGUMENT),
        (_server_error("Neo.ClientError.Statement.SyntaxError"), StatusCode.INVALID_ARGUMENT),
        (
            _server_error("Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration"),
            StatusCode.DEADLINE_EXCEEDED,
        ),
        (
            _server_error("Neo.ClientError.Transaction.TransactionTimedOut"),
            StatusCode.DEADLINE_EXCEEDED,
        ),
        # a lock wait cut off by the transaction timeout (Neo4j 5; the driver's name for 4.x's)
        (
            _server_error("Neo.ClientError.Transaction.LockClientStopped"),
            StatusCode.DEADLINE_EXCEEDED,
        ),
        (
            _server_error("Neo.TransientError.Transaction.LockClientStopped"),
            StatusCode.DEADLINE_EXCEEDED,
        ),
        (_server_error("Neo.ClientError.Transaction.Terminated"), StatusCode.ABORTED),
        (_server_error("Neo.ClientError.Security.Unauthorized"), StatusCode.UNAUTHENTICATED),
        (_server_error("Neo.ClientError.Security.Forbidden"), StatusCode.PERMISSION_DENIED),
        (_server_error("Neo.DatabaseError.General.UnknownError"), StatusCode.INTERNAL),
    ],
)
def test_driver_errors_translate_to_status_codes(
    error: BaseException, expected: StatusCode
) -> None:
    translated = translate_error(error, "apply")

    assert translated.code is expected
    assert isinstance(translated, GraphIngestError)
    assert isinstance(translated, DependencyUnavailable) == (expected is StatusCode.UNAVAILABLE)
    assert type(error).__name__ in translated.message
