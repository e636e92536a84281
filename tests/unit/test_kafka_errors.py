"""Kafka error translation: one mapping from librdkafka codes to our status codes."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import (
    KafkaIngestError,
    KafkaUnavailable,
    ProducerFenced,
    status_of,
    translate_kafka_error,
)


@pytest.mark.parametrize(
    ("kafka_code", "status"),
    [
        (KafkaError._ALL_BROKERS_DOWN, StatusCode.UNAVAILABLE),
        (KafkaError._TRANSPORT, StatusCode.UNAVAILABLE),
        (KafkaError._TIMED_OUT, StatusCode.UNAVAILABLE),
        (KafkaError.REQUEST_TIMED_OUT, StatusCode.UNAVAILABLE),
        (KafkaError.NOT_LEADER_FOR_PARTITION, StatusCode.UNAVAILABLE),
        (KafkaError.NOT_ENOUGH_REPLICAS, StatusCode.UNAVAILABLE),
        (KafkaError._MSG_TIMED_OUT, StatusCode.DEADLINE_EXCEEDED),
        (KafkaError._QUEUE_FULL, StatusCode.RESOURCE_EXHAUSTED),
        (KafkaError.MSG_SIZE_TOO_LARGE, StatusCode.INVALID_ARGUMENT),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, StatusCode.INVALID_ARGUMENT),
        (KafkaError._UNKNOWN_TOPIC, StatusCode.INVALID_ARGUMENT),
        (KafkaError.INVALID_CONFIG, StatusCode.INVALID_ARGUMENT),
        (KafkaError.TOPIC_ALREADY_EXISTS, StatusCode.ALREADY_EXISTS),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, StatusCode.PERMISSION_DENIED),
        (KafkaError.SASL_AUTHENTICATION_FAILED, StatusCode.UNAUTHENTICATED),
        (KafkaError.PRODUCER_FENCED, StatusCode.FAILED_PRECONDITION),
        (KafkaError._FAIL, StatusCode.INTERNAL),
        (KafkaError.UNKNOWN, StatusCode.INTERNAL),
    ],
)
def test_codes_map_to_status(kafka_code: int, status: StatusCode) -> None:
    error = translate_kafka_error(KafkaException(KafkaError(kafka_code)), context="producing")

    assert isinstance(error, KafkaIngestError)
    assert error.code is status
    assert error.kafka_code == kafka_code
    assert str(error).startswith("producing: Kafka ")
    assert isinstance(error, DependencyUnavailable) == (status is StatusCode.UNAVAILABLE)


def test_unavailable_is_a_dependency_error_of_our_tree() -> None:
    error = translate_kafka_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))

    assert isinstance(error, KafkaUnavailable)
    assert isinstance(error, GraphIngestError)
    assert error.code.is_transient


def test_unmapped_retriable_error_is_unavailable_and_fatal_is_flagged() -> None:
    assert status_of(KafkaError(KafkaError.UNKNOWN, retriable=True)) is StatusCode.UNAVAILABLE

    fatal = translate_kafka_error(KafkaError(KafkaError._FATAL, fatal=True))

    assert isinstance(fatal, KafkaIngestError)
    assert fatal.fatal
    assert fatal.code is StatusCode.INTERNAL


@pytest.mark.parametrize(
    "kafka_code",
    [KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH],
)
def test_fencing_is_its_own_fatal_error_whichever_code_reports_it(kafka_code: int) -> None:
    # librdkafka flags _FENCED as fatal when it fences a client, but not the broker codes.
    error = translate_kafka_error(KafkaException(KafkaError(kafka_code)), context="committing")

    assert isinstance(error, ProducerFenced)
    assert error.fatal
    assert error.code is StatusCode.FAILED_PRECONDITION


def test_a_call_on_a_client_that_already_failed_fatally_is_fatal() -> None:
    # What produce() raises after a fatal error: code _FATAL, not itself flagged fatal.
    error = translate_kafka_error(KafkaException(KafkaError(KafkaError._FATAL)))

    assert isinstance(error, KafkaIngestError)
    assert error.fatal
    assert error.code is StatusCode.INTERNAL


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (BufferError("Local: Queue full"), StatusCode.RESOURCE_EXHAUSTED),
        (TypeError("expected bytes"), StatusCode.INVALID_ARGUMENT),
        (ValueError("bad config"), StatusCode.INVALID_ARGUMENT),
        (RuntimeError("boom"), StatusCode.INTERNAL),
    ],
)
def test_client_side_exceptions(exc: Exception, status: StatusCode) -> None:
    error = translate_kafka_error(exc)

    assert isinstance(error, KafkaIngestError)
    assert error.code is status


def test_our_errors_pass_through_unchanged() -> None:
    ours = GraphIngestError("already translated")

    assert translate_kafka_error(ours) is ours


def test_raise_from_keeps_the_driver_error() -> None:
    original = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))

    with pytest.raises(KafkaIngestError) as caught:
        try:
            raise original
        except KafkaException as exc:
            raise translate_kafka_error(exc) from exc

    assert caught.value.__cause__ is original
    assert caught.value.kafka_name == "_MSG_TIMED_OUT"
