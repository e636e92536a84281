"""Every Kafka header name graph-ingest writes or reads, and typed helpers to build and read them:
the wire's header names, in one place, free of any Kafka client (``kafka.headers`` reads a
consumed confluent-kafka message into the pairs these helpers take).

Values are bytes, UTF-8 text. Kafka allows a header name to repeat; a reader takes the *last*
occurrence (the one added most recently). Datetimes are ISO 8601 in UTC (``...Z``), so a person
reading a tier message with a console consumer sees when it is due.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, TypeAdapter, ValidationError

from graph_ingest.domain.limits import MAX_ID_LENGTH, ErrorClass, ErrorMessage, Offset, StoredId
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import TraceId, check_trace_id, parse_traceparent
from graph_ingest.schemas.errors import MalformedHeader

# What confluent-kafka's Message.headers() returns.
Headers = Sequence[tuple[str, bytes | None]] | None
# A consumed message's headers as read once (``kafka.headers.headers_of``), as messages keep them.
MessageHeaders = tuple[tuple[str, bytes | None], ...]

# Plan and operation-event messages.
OPERATION_ID = "operation_id"
FINGERPRINT = "fingerprint"
CONTENT_TYPE = "content-type"
SEQUENCE = "sequence"
STAGE = "stage"
RELEASED = "released"
# On a plan re-published from its stored frozen bytes: who did it (``resume`` or ``recover``).
RESUMED = "resumed"
# On a plan re-published from the DLQ by ``graph-ingest dlq replay``: the entry's id.
DLQ_REPLAY = "dlq_replay"
# On a DLQ-topic message: the entry it is the newest envelope of, and its status.
DLQ_ID = "dlq_id"
DLQ_STATUS = "dlq_status"
# W3C Trace Context, as the producer of a request or a plan may send it.
TRACEPARENT = "traceparent"
# On an ingest request, and on the plan (or planning DLQ entry) made of it: the id `submit`
# returned, by which `status` and `submit --wait` find what became of the request.
SUBMISSION_ID = "submission_id"
# On an ingest request the planner worker submitted again after a CONFLICT: the operation that
# conflicted, and which replan of the submission this is (1, 2, ...).
REPLAN_OF = "replan_of"
REPLAN_ATTEMPT = "replan_attempt"
# On a plan message whose value is a claim-check reference, not the plan (the plan was too large
# for the topic and is stored in PostgreSQL): the reference format, "v1".
CLAIM_CHECK = "claim_check"
# The copy of a failed plan on a retry tier.
RETRY_ATTEMPT = "retry_attempt"
RETRY_DUE_AT = "retry_due_at"
ORIGINAL_TOPIC = "original_topic"
ORIGINAL_PARTITION = "original_partition"
ORIGINAL_OFFSET = "original_offset"
FIRST_FAILURE_AT = "first_failure_at"
ERROR_CODE = "error_code"
ERROR_CLASS = "error_class"
ERROR_MESSAGE = "error_message"
TRACE_ID = "trace_id"

# The headers that say whose work a plan is (the trace it belongs to, the submission it came
# from): kept with the operation at its first admission and carried on every re-send of its plan
# (resume, recover, release, DLQ replay), so that neither the trace nor the submission loses it.
WORK_HEADERS = (TRACEPARENT, SUBMISSION_ID)


def header_value(headers: Headers, name: str) -> bytes | None:
    """The last value of ``name``; None when absent (or sent as a null value)."""
    found: bytes | None = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def header_text(headers: Headers, name: str) -> str | None:
    """The last value of ``name`` as text; MalformedHeader when it is not UTF-8."""
    value = header_value(headers, name)
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedHeader(f"header {name} is not UTF-8: {value[:40]!r}") from None


_STORED_ID: TypeAdapter[str] = TypeAdapter(StoredId)


def header_id(headers: Headers, name: str) -> str | None:
    """The last value of ``name`` as an id PostgreSQL can store and index (``StoredId``: no NUL,
    1 to MAX_ID_LENGTH characters); MalformedHeader when it is not one."""
    text = header_text(headers, name)
    if text is None:
        return None
    try:
        return _STORED_ID.validate_python(text)
    except ValidationError:
        raise MalformedHeader(
            f"header {name} is no storable id (1 to {MAX_ID_LENGTH} characters, no NUL): "
            f"{len(text)} characters, {text[:40]!r}"
        ) from None


def work_headers(headers: Headers) -> dict[str, str]:
    """The ``WORK_HEADERS`` a message carries, as text; a value that is no storable id (not
    UTF-8, a NUL, past MAX_ID_LENGTH characters) identifies nothing a re-send could carry, and is
    left out."""
    found: dict[str, str] = {}
    for name in WORK_HEADERS:
        try:
            text = header_id(headers, name)
        except MalformedHeader:
            continue
        if text:
            found[name] = text
    return found


def trace_id_from_headers(headers: Headers) -> str | None:
    """The trace id a message carries: ours (on tier, DLQ and replay copies), else the producer's
    ``traceparent``'s; None when neither is valid (the caller then starts a new trace, as the
    W3C specification asks for an invalid traceparent, rather than failing the message)."""
    for name, trace_id_of in ((TRACE_ID, check_trace_id), (TRACEPARENT, _traceparent_trace_id)):
        try:
            text = header_text(headers, name)
            if text is not None:
                return trace_id_of(text)
        except (MalformedHeader, ValueError):
            continue
    return None


def _traceparent_trace_id(value: str) -> str:
    return parse_traceparent(value).trace_id


# Each retry header and the RetryHeaders field it carries.
_RETRY_FIELDS = {
    RETRY_ATTEMPT: "attempt",
    RETRY_DUE_AT: "due_at",
    ORIGINAL_TOPIC: "original_topic",
    ORIGINAL_PARTITION: "original_partition",
    ORIGINAL_OFFSET: "original_offset",
    FIRST_FAILURE_AT: "first_failure_at",
    ERROR_CODE: "error_code",
    ERROR_CLASS: "error_class",
    ERROR_MESSAGE: "error_message",
    TRACE_ID: "trace_id",
}
RETRY_HEADERS = tuple(_RETRY_FIELDS)

UtcDatetime = Annotated[AwareDatetime, AfterValidator(lambda at: at.astimezone(UTC))]
# What Kafka accepts as a topic name: a header claiming another is not one of our copies.
TopicName = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]


class RetryHeaders(FrozenModel):
    """What a retry-tier copy of a failed plan says about its journey so far.

    ``attempt`` numbers the delivery this copy is for: the first delivery (on the main topic, no
    retry headers) is attempt 1, its copy on the first tier attempt 2."""

    attempt: int = Field(ge=2)
    due_at: UtcDatetime
    original_topic: TopicName
    original_partition: int = Field(ge=0, le=2**31 - 1)
    original_offset: Offset
    first_failure_at: UtcDatetime
    error_code: StatusCode
    error_class: ErrorClass
    error_message: ErrorMessage
    trace_id: TraceId

    def to_headers(self) -> list[tuple[str, bytes]]:
        values = self.model_dump(mode="json")
        return [(name, str(values[field]).encode("utf-8")) for name, field in _RETRY_FIELDS.items()]

    @classmethod
    def from_headers(cls, headers: Headers) -> RetryHeaders | None:
        """None for a message that is no retry copy (no attempt header); MalformedHeader when the
        retry headers are incomplete or invalid."""
        if header_value(headers, RETRY_ATTEMPT) is None:
            return None
        texts = {field: header_text(headers, name) for name, field in _RETRY_FIELDS.items()}
        missing = [name for name, field in _RETRY_FIELDS.items() if texts[field] is None]
        if missing:
            raise MalformedHeader(f"retry headers incomplete: {', '.join(missing)} missing")
        try:
            return cls.model_validate(texts)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise MalformedHeader(f"retry headers invalid: {problems}") from exc


def with_retry_headers(headers: Headers, retry: RetryHeaders) -> list[tuple[str, bytes | None]]:
    """The headers of the next copy: the message's own (traceparent included) as they were, the
    previous copy's retry headers replaced by ``retry``'s."""
    kept = [(key, value) for key, value in headers or () if key not in _RETRY_FIELDS]
    return [*kept, *retry.to_headers()]


__all__ = [
    "CLAIM_CHECK",
    "CONTENT_TYPE",
    "DLQ_ID",
    "DLQ_REPLAY",
    "DLQ_STATUS",
    "ERROR_CLASS",
    "ERROR_CODE",
    "ERROR_MESSAGE",
    "FINGERPRINT",
    "FIRST_FAILURE_AT",
    "OPERATION_ID",
    "ORIGINAL_OFFSET",
    "ORIGINAL_PARTITION",
    "ORIGINAL_TOPIC",
    "RELEASED",
    "REPLAN_ATTEMPT",
    "REPLAN_OF",
    "RETRY_ATTEMPT",
    "RETRY_DUE_AT",
    "RETRY_HEADERS",
    "SEQUENCE",
    "STAGE",
    "SUBMISSION_ID",
    "TRACEPARENT",
    "TRACE_ID",
    "WORK_HEADERS",
    "Headers",
    "MessageHeaders",
    "RetryHeaders",
    "header_id",
    "header_text",
    "header_value",
    "trace_id_from_headers",
    "with_retry_headers",
    "work_headers",
]
