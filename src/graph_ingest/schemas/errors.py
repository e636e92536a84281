"""Errors of the Avro codec. A message that cannot be decoded is poison: it keeps its raw bytes."""

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode


class CodecError(GraphIngestError):
    """Root of the codec's errors: the content, not the infrastructure, is wrong; never retried."""

    code = StatusCode.INVALID_ARGUMENT


class DecodeError(CodecError):
    """Bytes that are not a valid message of the expected kind. ``raw`` goes to the DLQ envelope."""

    def __init__(self, message: str, *, raw: bytes) -> None:
        super().__init__(message)
        self.raw = raw


class EncodeError(CodecError):
    """A domain value the wire format cannot carry faithfully (naive datetime, int beyond 64 bits)."""


class MalformedHeader(GraphIngestError):
    """A header graph-ingest writes itself is missing, not UTF-8 or not the value it should be.

    Poison like a codec error (the message, not a service, is wrong), and said of Kafka, whose
    headers they are, so that ``dependency_of`` names the same service as before."""

    code = StatusCode.INVALID_ARGUMENT
    dependency = "kafka"


class PlanPublishError(GraphIngestError):
    """A plan could not be published as given (it is not what its fingerprint says)."""

    code = StatusCode.INVALID_ARGUMENT


class RequestRefused(GraphIngestError):
    """A request that cannot be sent as it is (too large, not encodable, a bad traceparent);
    nothing of the call it came in was sent."""

    code = StatusCode.INVALID_ARGUMENT
