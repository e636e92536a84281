"""Errors of the local stack. The first line of the message is meant to be printed alone."""

from __future__ import annotations

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode


class StackError(GraphIngestError):
    """The local stack could not be started, checked or stopped.

    ``details`` holds what helps diagnose it (usually the last lines of a log file), kept apart so
    that the message itself stays one line.
    """

    code = StatusCode.FAILED_PRECONDITION

    def __init__(self, message: str, *, details: str = "", code: StatusCode | None = None) -> None:
        super().__init__(message, code=code)
        self.details = details


class MissingToolError(StackError):
    """java, mvn or the PostgreSQL server binaries are not installed."""


class PortInUseError(StackError):
    """A port the stack needs is taken by a process the stack did not start."""


class FetchError(StackError):
    """Maven could not fetch a runtime classpath."""

    code = StatusCode.UNAVAILABLE


class StartupError(StackError):
    """A service exited or did not become ready in time."""

    code = StatusCode.UNAVAILABLE
