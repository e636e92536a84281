"""A transactional call is waited for no longer than its timeout and a grace: librdkafka does not
always honour the timeout (send_offsets_to_transaction and a lost group coordinator)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from graph_ingest.kafka import transactional
from graph_ingest.kafka.errors import KafkaUnavailable
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.settings.kafka import KafkaSettings

pytestmark = pytest.mark.timeout(30)


def producer() -> TransactionalProducer:
    return TransactionalProducer(KafkaSettings(), "tx-unit", timeout_s=0.1)


def test_a_call_that_overruns_its_timeout_is_given_up_fatal_and_of_unknown_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transactional, "CALL_GRACE_S", 0.1)
    released = threading.Event()

    def stuck(timeout_s: float) -> None:
        released.wait(20)  # as librdkafka waiting for a coordinator, whatever timeout_s says

    try:
        with pytest.raises(KafkaUnavailable) as raised:
            producer()._bounded(stuck, 0.1)
    finally:
        released.set()
    assert raised.value.fatal
    assert raised.value.outcome_unknown
    assert "stuck as tx-unit did not return within 0.2s" in str(raised.value)


def test_a_call_within_its_timeout_returns_what_it_returned_or_raises_what_it_raised() -> None:
    def answer(value: str, timeout_s: float) -> tuple[str, float]:
        return value, timeout_s

    def failing(timeout_s: float) -> None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    assert producer()._bounded(answer, 0.1, "a") == ("a", 0.1)
    with pytest.raises(KafkaException):
        producer()._bounded(failing, 0.1)
