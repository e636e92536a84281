"""Translate confluent-kafka errors into ours, once: every Kafka adapter raises through here.

``translate_kafka_error(exc)`` returns the error to raise; callers write
``raise translate_kafka_error(exc, context="producing to X") from exc`` so the driver's exception
stays attached as ``__cause__``.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.status import StatusCode


class KafkaIngestError(GraphIngestError):
    """An error from Kafka (broker, client or admin), with the librdkafka code it came from."""

    dependency = "kafka"

    def __init__(
        self,
        message: str,
        *,
        code: StatusCode | None = None,
        kafka_code: int | None = None,
        kafka_name: str | None = None,
        fatal: bool = False,
    ) -> None:
        super().__init__(message, code=code)
        self.kafka_code = kafka_code
        self.kafka_name = kafka_name
        self.fatal = fatal
        """True when the client instance is unusable and must be recreated (librdkafka fatal)."""
        self.outcome_unknown = False
        """Set by the transactional producer when a transaction ended neither committed nor
        aborted as far as this client knows (a commit that overran, an abort that failed): it
        may have committed. Only the group's committed offsets, read once a new client has
        taken over, tell."""
        self.delivered = 0
        """Set by the producers when a batch fails: how many leading messages of it the broker
        had accepted (a prefix, so acting on just them keeps order). In a transaction that was
        then aborted they are not visible to read_committed consumers: send them again."""


class KafkaUnavailable(KafkaIngestError, DependencyUnavailable):
    """The brokers could not be reached, or did not answer in time."""

    code = StatusCode.UNAVAILABLE


class ProducerFenced(KafkaIngestError):
    """A newer producer initialised transactions under this producer's ``transactional.id``: the
    broker rejects this client's writes from now on, and its open transaction is aborted."""

    code = StatusCode.FAILED_PRECONDITION


class TopicMismatch(KafkaIngestError):
    """An existing topic is configured in a way the pipeline cannot work with."""

    code = StatusCode.FAILED_PRECONDITION


def _codes(*names: str) -> frozenset[int]:
    # getattr: a name missing from an older librdkafka must not break the import.
    return frozenset(getattr(KafkaError, n) for n in names if hasattr(KafkaError, n))


_UNAVAILABLE = _codes(
    "_ALL_BROKERS_DOWN",
    "_TRANSPORT",
    "_RESOLVE",
    "_TIMED_OUT",
    "_TIMED_OUT_QUEUE",
    "_WAIT_COORD",
    "_NODE_UPDATE",
    "_UNKNOWN_BROKER",
    "_DESTROY_BROKER",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "BROKER_NOT_AVAILABLE",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "REPLICA_NOT_AVAILABLE",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
    "NOT_CONTROLLER",
    "KAFKA_STORAGE_ERROR",
    "REBOOTSTRAP_REQUIRED",
)
_DEADLINE_EXCEEDED = _codes("_MSG_TIMED_OUT")
_RESOURCE_EXHAUSTED = _codes("_QUEUE_FULL", "THROTTLING_QUOTA_EXCEEDED", "RECORD_LIST_TOO_LARGE")
_INVALID_ARGUMENT = _codes(
    "MSG_SIZE_TOO_LARGE",
    "INVALID_MSG_SIZE",
    "INVALID_MSG",
    "INVALID_RECORD",
    "_BAD_MSG",
    "_INVALID_ARG",
    "_INVALID_TYPE",
    "_KEY_SERIALIZATION",
    "_VALUE_SERIALIZATION",
    "_UNKNOWN_TOPIC",
    "_UNKNOWN_PARTITION",
    "UNKNOWN_TOPIC_OR_PART",
    "UNKNOWN_TOPIC_ID",
    "TOPIC_EXCEPTION",
    "INVALID_PARTITIONS",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT",
    "INVALID_CONFIG",
    "INVALID_REQUEST",
    "INVALID_REQUIRED_ACKS",
    "INVALID_TIMESTAMP",
    "POLICY_VIOLATION",
    "UNSUPPORTED_COMPRESSION_TYPE",
)
_ALREADY_EXISTS = _codes("TOPIC_ALREADY_EXISTS")
_PERMISSION_DENIED = _codes(
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
)
_UNAUTHENTICATED = _codes(
    "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE", "_SSL"
)
_FENCED = _codes("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
_FAILED_PRECONDITION = _FENCED | _codes(
    "TOPIC_DELETION_DISABLED",
    "UNSUPPORTED_VERSION",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "_UNSUPPORTED_FEATURE",
)


def status_of(error: KafkaError) -> StatusCode:
    """The status code a librdkafka error maps to (see DESIGN.md §5)."""
    code = error.code()
    for codes, status in (
        (_UNAVAILABLE, StatusCode.UNAVAILABLE),
        (_DEADLINE_EXCEEDED, StatusCode.DEADLINE_EXCEEDED),
        (_RESOURCE_EXHAUSTED, StatusCode.RESOURCE_EXHAUSTED),
        (_INVALID_ARGUMENT, StatusCode.INVALID_ARGUMENT),
        (_ALREADY_EXISTS, StatusCode.ALREADY_EXISTS),
        (_PERMISSION_DENIED, StatusCode.PERMISSION_DENIED),
        (_UNAUTHENTICATED, StatusCode.UNAUTHENTICATED),
        (_FAILED_PRECONDITION, StatusCode.FAILED_PRECONDITION),
    ):
        if code in codes:
            return status
    if is_fatal(error):
        return StatusCode.INTERNAL
    return StatusCode.UNAVAILABLE if error.retriable() else StatusCode.INTERNAL


def is_fatal(error: KafkaError) -> bool:
    """True when the client instance that reported ``error`` can never produce again.

    A client that has hit a fatal error answers every later call with ``_FATAL``, which librdkafka
    does not flag as fatal itself; a fenced producer is finished whichever code reports it.
    """
    return bool(error.fatal()) or error.code() == KafkaError._FATAL or error.code() in _FENCED


def _kafka_error_of(exc: BaseException | KafkaError) -> KafkaError | None:
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def translate_kafka_error(
    exc: BaseException | KafkaError, *, context: str = ""
) -> GraphIngestError:
    """Map a confluent-kafka error (``KafkaException``, ``KafkaError``, or the ``BufferError`` /
    ``ValueError`` / ``TypeError`` that ``produce`` raises) to a :class:`KafkaIngestError`.

    UNAVAILABLE errors are also :class:`~graph_ingest.domain.errors.DependencyUnavailable`; fencing is
    :class:`ProducerFenced`. An error that already is ours is returned unchanged.
    """
    if isinstance(exc, GraphIngestError):
        return exc
    prefix = f"{context}: " if context else ""
    error = _kafka_error_of(exc)
    if error is None:
        if isinstance(exc, BufferError):
            return KafkaIngestError(
                f"{prefix}producer queue full: {exc}", code=StatusCode.RESOURCE_EXHAUSTED
            )
        if isinstance(exc, ValueError | TypeError):
            return KafkaIngestError(
                f"{prefix}invalid Kafka argument: {exc}", code=StatusCode.INVALID_ARGUMENT
            )
        return KafkaIngestError(f"{prefix}{type(exc).__name__}: {exc}", code=StatusCode.INTERNAL)

    status = status_of(error)
    message = f"{prefix}Kafka {error.name()}: {error.str()}"
    cls: type[KafkaIngestError] = KafkaIngestError
    if error.code() in _FENCED:
        cls = ProducerFenced
    elif status is StatusCode.UNAVAILABLE:
        cls = KafkaUnavailable
    return cls(
        message,
        code=status,
        kafka_code=error.code(),
        kafka_name=error.name(),
        fatal=is_fatal(error),
    )


__all__ = [
    "KafkaIngestError",
    "KafkaUnavailable",
    "ProducerFenced",
    "TopicMismatch",
    "is_fatal",
    "status_of",
    "translate_kafka_error",
]
