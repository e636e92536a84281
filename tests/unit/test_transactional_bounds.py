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


def test_calls_run_one_after_another_on_one_helper_thread_that_close_ends() -> None:
    tx = producer()
    ran_on = [tx._bounded(lambda timeout_s: threading.current_thread(), 0.1) for _ in range(3)]

    assert len(set(ran_on)) == 1
    assert ran_on[0] is not threading.current_thread()
    tx.close()
    ran_on[0].join(5)
    assert not ran_on[0].is_alive()


def test_the_call_after_an_overrun_gets_a_new_helper_and_the_stuck_one_ends_with_its_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transactional, "CALL_GRACE_S", 0.1)
    tx = producer()
    released = threading.Event()
    stuck_on: list[threading.Thread] = []

    def stuck(timeout_s: float) -> None:
        stuck_on.append(threading.current_thread())
        released.wait(20)

    try:
        with pytest.raises(KafkaUnavailable):
            tx._bounded(stuck, 0.1)
        assert tx._bounded(lambda timeout_s: threading.current_thread(), 0.1) is not stuck_on[0]
    finally:
        released.set()
    stuck_on[0].join(5)
    assert not stuck_on[0].is_alive()
