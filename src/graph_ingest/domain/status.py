"""Status codes in the spirit of gRPC: the one vocabulary every failure is classified into."""

from enum import StrEnum


class StatusCode(StrEnum):
    OK = "OK"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    DATA_LOSS = "DATA_LOSS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    NOT_FOUND = "NOT_FOUND"
    ABORTED = "ABORTED"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    INTERNAL = "INTERNAL"

    @property
    def is_transient(self) -> bool:
        """True when the same work may succeed later without any change to it: the one
        transience rule (``resilience.policy.scope_of`` refines the transient codes into failure
        scopes and never decides transience again)."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {
        StatusCode.UNAVAILABLE,
        StatusCode.DEADLINE_EXCEEDED,
        StatusCode.ABORTED,
        StatusCode.RESOURCE_EXHAUSTED,
        StatusCode.INTERNAL,
    }
)
