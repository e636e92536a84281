"""What the DLQ tools raise: an unknown entry, and an operation they refuse with the reason."""

from __future__ import annotations

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode


class DlqError(GraphIngestError):
    """Root of the DLQ tools' errors."""


class DlqEntryNotFound(DlqError):
    code = StatusCode.NOT_FOUND


class DlqRefused(DlqError):
    """The entry cannot be replayed or resolved as asked; the message says why and what to do."""

    code = StatusCode.FAILED_PRECONDITION


class DlqWaiting(DlqRefused):
    """The entry's plan waits behind another operation that is in the DLQ itself: replaying it
    now would only send it back there. It is released when that one is replayed and completes."""


__all__ = ["DlqEntryNotFound", "DlqError", "DlqRefused", "DlqWaiting"]
