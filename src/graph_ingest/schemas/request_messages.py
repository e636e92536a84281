"""The ingest request message: a document for the planner on the requests topic, first sent or
sent again.

``graph-ingest submit`` and the ingest producer send a request as :func:`request_message` builds
it (keyed ``space/documentId``, its submission id and W3C ``traceparent`` in headers, checked
against the topic's size limit); the planner's replan after a CONFLICT and a DLQ replay send one
again as :func:`resubmitted_request` builds it, keeping the request's own headers and saying why
it is sent again. One home for both, so a re-sent request is the request that was submitted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from graph_ingest.domain.fingerprint import canonical_json
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.trace import InvalidTraceparent, TraceParent, parse_traceparent
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import encode_ingest_request
from graph_ingest.schemas.errors import EncodeError, RequestRefused
from graph_ingest.schemas.headers import Headers
from graph_ingest.schemas.messages import OutboxMessage, message_size

REQUEST_CONTENT_TYPE = "application/vnd.graph-ingest.ingest-request+avro;v=1"

# Headers a request re-submitted for a replan does not carry over from the copy it was read from.
_NOT_CARRIED = frozenset(
    {kafka_headers.REPLAN_OF, kafka_headers.REPLAN_ATTEMPT, kafka_headers.DLQ_REPLAY}
)


def submission_id_of(request: IngestRequest) -> str:
    """The id ``submit`` returns for ``request``: its operation id, else ``sub-`` and a hash of
    its whole content (RFC 8785 canonical JSON), so that equal requests get equal ids."""
    if request.operation_id is not None:
        return request.operation_id
    digest = hashlib.sha256(canonical_json(request.model_dump(mode="json"))).hexdigest()
    return f"sub-{digest[:32]}"


@dataclass(frozen=True, slots=True)
class Submitted:
    """A request the broker has acknowledged."""

    submission_id: str
    key: str
    trace_id: str


def request_message(
    request: IngestRequest, topic: str, *, max_bytes: int, traceparent: str | None = None
) -> tuple[OutboxMessage, Submitted]:
    """The Kafka message of ``request`` (key ``space/documentId``) and what ``submit`` reports
    of it; RequestRefused when it cannot be sent."""
    try:
        value = encode_ingest_request(request)
    except EncodeError as exc:
        raise RequestRefused(f"ingest request {request.key}: {exc}") from exc
    try:
        parent = TraceParent.new() if traceparent is None else parse_traceparent(traceparent)
    except InvalidTraceparent as exc:
        raise RequestRefused(f"ingest request {request.key}: {exc}") from exc
    submission = Submitted(submission_id_of(request), request.key, parent.trace_id)
    message = OutboxMessage(
        topic=topic,
        key=request.key.encode("utf-8"),
        value=value,
        headers={
            kafka_headers.SUBMISSION_ID: submission.submission_id,
            kafka_headers.TRACEPARENT: parent.header_value(),
            kafka_headers.CONTENT_TYPE: REQUEST_CONTENT_TYPE,
        },
        operation_id=request.operation_id,
    )
    size = message_size(message)
    if size > max_bytes:
        raise RequestRefused(
            f"ingest request {request.key} is {size} bytes; {topic} takes at most {max_bytes} "
            "(TOPICS__MAX_MESSAGE_BYTES): send the document as content_ref with content_hash"
        )
    return message, submission


def carried_headers(headers: Headers) -> dict[str, str]:
    """The headers a request submitted again (a replan, a DLQ replay) keeps of the copy it is made
    of: the request's own (submission id, traceparent, content type), not how that copy came."""
    return {
        key: value.decode("utf-8", "replace")
        for key, value in headers or ()
        if value is not None and key not in _NOT_CARRIED
    }


def resubmitted_request(
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    marks: Mapping[str, str],
) -> OutboxMessage:
    """An ingest request submitted again (a replan, a DLQ replay): its key and value as it was
    submitted, the headers it keeps of that copy (``carried_headers``) and ``marks``, which say
    why it is sent again (``replan_marks``, or the ``dlq_replay`` entry)."""
    return OutboxMessage(
        topic=topic, key=key, value=value or b"", headers={**carried_headers(headers), **marks}
    )


__all__ = [
    "REQUEST_CONTENT_TYPE",
    "Submitted",
    "carried_headers",
    "request_message",
    "resubmitted_request",
    "submission_id_of",
]
