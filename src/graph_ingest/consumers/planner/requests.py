"""A consumed ingest request: where it came from, its raw bytes, and the request or why not."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Message

from graph_ingest.dlq.entries import replayed_from
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import RetryRead
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_ingest_request
from graph_ingest.schemas.headers import MessageHeaders


@dataclass(frozen=True, slots=True)
class RequestMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: MessageHeaders = ()
    request: IngestRequest | None = None
    error: GraphIngestError | None = None

    @property
    def position(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    @property
    def document(self) -> tuple[str, str] | None:
        return None if self.request is None else (self.request.space, self.request.document_id)

    @property
    def submission_id(self) -> str | None:
        """The id the producer returned (``submission_id`` header); None when it sent none or
        none PostgreSQL can hold (decode refuses such a request)."""
        return self._stored_id(kafka_headers.SUBMISSION_ID)

    @property
    def replay_of(self) -> str | None:
        """The DLQ entry this request was replayed from (``dlq_replay`` header); None for a
        first-hand request, or a header that is no DLQ id."""
        return replayed_from(self.headers)

    def _stored_id(self, name: str) -> str | None:
        try:
            return kafka_headers.header_id(self.headers, name)
        except GraphIngestError:
            return None

    def context(self) -> str:
        """The fixed log prefix: topic[partition]@offset key=<space/documentId>."""
        key = self.key.decode("utf-8", "replace") if self.key is not None else None
        return f"{self.topic}[{self.partition}]@{self.offset} key={key}"


def decode_request_message(
    message: Message, headers: MessageHeaders, _retry: RetryRead
) -> RequestMessage:
    """Decode one request message (requests have no retry tiers: ``_retry`` is unused); any
    failure is kept on the message, never raised. The key must
    be the request's ``space/documentId`` (all requests of a document share a partition, so one
    planner orders them), and a ``submission_id`` header an id PostgreSQL can hold."""
    value = message.value()
    fields = RequestMessage(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=value,
        headers=headers,
    )
    try:
        if not value:
            raise GraphIngestError("empty ingest request message", code=StatusCode.INVALID_ARGUMENT)
        request = decode_ingest_request(value)
        if fields.key != request.key.encode("utf-8"):
            raise GraphIngestError(
                f"ingest request for {request.key} sent with key {fields.key!r}: the key must be "
                "space/documentId",
                code=StatusCode.INVALID_ARGUMENT,
            )
        # Recorded with the submission: an id PostgreSQL refuses would fail the whole batch.
        kafka_headers.header_id(headers, kafka_headers.SUBMISSION_ID)
    except GraphIngestError as exc:
        return _with(fields, error=exc)
    except Exception as exc:  # hostile input may raise anything in third-party code
        error = GraphIngestError(
            f"ingest request does not decode: {type(exc).__name__}: {exc}",
            code=StatusCode.INVALID_ARGUMENT,
        )
        error.__cause__ = exc
        return _with(fields, error=error)
    return _with(fields, request=request)


def _with(
    fields: RequestMessage,
    *,
    request: IngestRequest | None = None,
    error: GraphIngestError | None = None,
) -> RequestMessage:
    return RequestMessage(
        topic=fields.topic,
        partition=fields.partition,
        offset=fields.offset,
        key=fields.key,
        value=fields.value,
        headers=fields.headers,
        request=request,
        error=error,
    )


__all__ = ["RequestMessage", "decode_request_message"]
