"""A planning DLQ entry as the DLQ tools show it: the ingest request that was never planned (whose
submission, which document, what it asked), not a plan that failed to decode.

An entry is a request's when its original topic is the requests topic (the rule the replayer and
the read table's ``is_request`` follow); it has no plan and no operation, and its replay submits
the request again for the planner to plan afresh. Pure: the requests topic is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_ingest.dlq.entries import submission_id_of_envelope
from graph_ingest.domain.dlq import DlqEnvelope
from graph_ingest.domain.request import RequestKind
from graph_ingest.schemas.codec import decode_ingest_request
from graph_ingest.store.dlq_index import DlqEntry


@dataclass(frozen=True, slots=True)
class RequestSummary:
    """What a planning entry's request asked, as far as its bytes tell."""

    submission_id: str | None
    """The id ``graph-ingest submit`` printed (its ``submission_id`` header), if it carries one."""
    space: str | None
    document_id: str | None
    kind: RequestKind | None
    document_version: str | None
    decodes: bool
    error: str | None = None
    """Why the value is no ingest request (``decodes`` False); the space and document are then
    the entry's (its message key's, if that names one)."""

    def line(self) -> str:
        submission = self.submission_id or "none recorded"
        document = f"{self.space}/{self.document_id}" if self.space else "an unknown document"
        if not self.decodes:
            return f"submission {submission}, {document}: its bytes are no request ({self.error})"
        return (
            f"submission {submission}: {self.kind} {document} version {self.document_version}, "
            "never planned (no plan, no operation)"
        )


def request_summary(
    entry: DlqEntry, envelope: DlqEnvelope, requests_topic: str
) -> RequestSummary | None:
    """The request of a planning entry (``envelope``: its own); None for the entry of a plan."""
    if envelope.original_topic != requests_topic:
        return None
    submission_id = submission_id_of_envelope(envelope)
    try:
        request = decode_ingest_request(envelope.original_value or b"")
    except Exception as exc:  # hostile bytes may raise anything in third-party code
        return RequestSummary(
            submission_id,
            entry.space,
            entry.document_id,
            kind=None,
            document_version=None,
            decodes=False,
            error=f"{type(exc).__name__}: {exc}",
        )
    return RequestSummary(
        submission_id,
        request.space,
        request.document_id,
        kind=request.kind,
        document_version=request.document_version,
        decodes=True,
    )


__all__ = ["RequestSummary", "request_summary"]
