"""A thin producer wrapper: produce a batch, wait for every acknowledgement, or raise.

``produce_batch`` never returns while a message of the batch is unconfirmed: callers (the outbox
relay, the plan publisher) only record success after it returns. Idempotence and ``acks=all`` come
from :meth:`KafkaSettings.producer_config`, so order within a partition survives broker retries.
``produce_nowait`` is for telemetry that must not hold its caller up: it hands one message over
and leaves its acknowledgement to a callback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import (
    KafkaIngestError,
    KafkaUnavailable,
    is_fatal,
    translate_kafka_error,
)
from graph_ingest.settings.kafka import KAFKA_CLIENT_LOGGER, KafkaSettings

logger = logging.getLogger(__name__)
_client_logger = logging.getLogger(KAFKA_CLIENT_LOGGER)

DEFAULT_FLUSH_TIMEOUT_S = 30.0
_QUEUE_FULL_POLL_S = 0.1

DeliveryCallback = Callable[[KafkaError | None, Message], None]


class ProducerMessage(Protocol):
    """What ``produce_batch`` needs of a message (``schemas.messages.OutboxMessage`` fits)."""

    @property
    def topic(self) -> str: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[str, str | bytes]: ...


class BatchProducer(Protocol):
    """What a re-publisher (``resume``, ``recover``, ``dlq replay``) needs of :class:`KafkaProducer`:
    tests stand a fake in for it where no broker is involved."""

    def start(self) -> None: ...

    def produce_batch(
        self, messages: Sequence[ProducerMessage], *, timeout_s: float | None = None
    ) -> None: ...


def kafka_headers(headers: Mapping[str, str | bytes]) -> list[tuple[str, str | bytes | None]]:
    """Header mapping -> the list librdkafka takes (str values encoded as UTF-8)."""
    return [(k, v if isinstance(v, bytes) else str(v).encode("utf-8")) for k, v in headers.items()]


def as_kafka_error(exc: BaseException | KafkaError, context: str) -> KafkaIngestError:
    error = translate_kafka_error(exc, context=context)
    if isinstance(error, KafkaIngestError):
        return error
    wrapped = KafkaIngestError(str(error), code=error.code)  # pragma: no cover - driver errors only
    wrapped.__cause__ = error
    return wrapped


class Deliveries:
    """Collects the delivery reports of one batch."""

    def __init__(self, size: int) -> None:
        self.pending = size
        self.ok = [False] * size
        self.failures: list[tuple[int, KafkaError]] = []

    def callback(self, index: int) -> Any:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            self.pending -= 1
            if err is None:
                self.ok[index] = True
            else:
                self.failures.append((index, err))

        return on_delivery

    def delivered_prefix(self) -> int:
        """How many leading messages are confirmed delivered."""
        return next((i for i, ok in enumerate(self.ok) if not ok), len(self.ok))


def new_client(settings: KafkaSettings, config: Mapping[str, Any]) -> Producer:
    """A confluent-kafka ``Producer`` for ``config`` whose errors and log lines reach our logging."""

    def on_client_error(err: KafkaError) -> None:
        # Broker-down and similar: librdkafka keeps retrying by itself; delivery reports decide.
        # On the client logger: repeated while the broker is down, so de-duplicated.
        level = logging.ERROR if is_fatal(err) else logging.WARNING
        _client_logger.log(level, "kafka[%s] client error: %s", settings.bootstrap_servers, err)

    # librdkafka's own log lines go through Python logging (``common_config``'s logger, served
    # by poll/flush).
    try:
        return Producer({**config, "error_cb": on_client_error})
    except (KafkaException, ValueError, TypeError) as exc:
        raise translate_kafka_error(exc, context="creating the Kafka producer") from exc


def produce_in_order(
    producer: Producer,
    messages: Sequence[ProducerMessage],
    deliveries: Deliveries,
    deadline: float,
) -> None:
    """Hand every message to the client in order; while its local queue is full, serve delivery
    reports to make room, until ``deadline``.

    If the client refuses a message, what was already handed over is in flight: it is settled
    (flushed, until the deadline) before raising, so that ``delivered`` on the error is known and
    late reports do not leak into the next batch's accounting.
    """
    for index, message in enumerate(messages):
        try:
            _produce_one(producer, message, deliveries.callback(index), deadline)
        except (KafkaException, BufferError, ValueError, TypeError) as exc:
            producer.flush(max(0.0, deadline - time.monotonic()))
            error = as_kafka_error(
                exc, f"producing message {index + 1}/{len(messages)} to {message.topic}"
            )
            error.delivered = deliveries.delivered_prefix()
            raise error from exc


def _produce_one(
    producer: Producer, message: ProducerMessage, on_delivery: Any, deadline: float
) -> None:
    while True:
        try:
            producer.produce(
                message.topic,
                value=message.value,
                key=message.key,
                headers=kafka_headers(message.headers),
                on_delivery=on_delivery,
            )
            return
        except BufferError:
            if time.monotonic() >= deadline:
                raise
            producer.poll(_QUEUE_FULL_POLL_S)


def delivery_failure(
    messages: Sequence[ProducerMessage], failures: list[tuple[int, KafkaError]]
) -> KafkaIngestError:
    """Our error for a batch whose deliveries failed: the first failed message's, by position."""
    failures.sort(key=lambda f: f[0])
    index, first = failures[0]
    error = as_kafka_error(
        first,
        f"{len(failures)} of {len(messages)} deliveries failed; first: message "
        f"{index + 1} to {messages[index].topic}",
    )
    error.fatal = error.fatal or any(is_fatal(f) for _, f in failures)
    return error


class KafkaProducer:
    """Owns one confluent-kafka ``Producer``; created in :meth:`start`, never in ``__init__``."""

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S,
        **overrides: Any,
    ) -> None:
        self._settings = settings
        self._flush_timeout_s = flush_timeout_s
        self._overrides = overrides
        self._producer: Producer | None = None

    @property
    def config(self) -> dict[str, Any]:
        return self._settings.producer_config(**self._overrides)

    @property
    def started(self) -> bool:
        return self._producer is not None

    def start(self) -> None:
        if self._producer is None:
            self._producer = new_client(self._settings, self.config)

    def __enter__(self) -> KafkaProducer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _require(self) -> Producer:
        if self._producer is None:
            raise KafkaIngestError(
                "KafkaProducer used before start()", code=StatusCode.FAILED_PRECONDITION
            )
        return self._producer

    def produce_batch(
        self, messages: Sequence[ProducerMessage], *, timeout_s: float | None = None
    ) -> None:
        """Produce every message in order, flush, and raise unless every delivery succeeded.

        Messages with the same key go to the same partition in the order given. On failure the
        :class:`KafkaIngestError` raised says in ``delivered`` how many leading messages were
        confirmed; later ones may or may not have been written, so callers send them again
        (at-least-once; consumers de-duplicate).
        """
        if not messages:
            return
        producer = self._require()
        timeout = self._flush_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        self._drain_leftovers(producer, deadline)

        deliveries = Deliveries(len(messages))
        produce_in_order(producer, messages, deliveries, deadline)
        remaining = producer.flush(max(0.0, deadline - time.monotonic()))
        if deliveries.failures:
            error = delivery_failure(messages, deliveries.failures)
            error.delivered = deliveries.delivered_prefix()
            if error.fatal:
                self._replace_client()
            raise error
        if remaining or deliveries.pending:
            error = KafkaIngestError(
                f"{deliveries.pending} of {len(messages)} messages not acknowledged within "
                f"{timeout:g}s (bootstrap {self._settings.bootstrap_servers})",
                code=StatusCode.DEADLINE_EXCEEDED,
            )
            error.delivered = deliveries.delivered_prefix()
            raise error

    def produce_nowait(self, message: ProducerMessage, on_delivery: DeliveryCallback) -> None:
        """Hand one message to the client and serve the delivery reports already due
        (``poll(0)``), without waiting for its acknowledgement: ``on_delivery`` hears of it from
        a later call or from :meth:`close`. Raises :class:`KafkaIngestError` at once if the client
        refuses the message (its local queue is full, a fatal error); after a fatal error the
        client is replaced, so that the next message can go."""
        producer = self._require()
        try:
            _produce_one(producer, message, on_delivery, deadline=time.monotonic())
        except (KafkaException, BufferError, ValueError, TypeError) as exc:
            error = as_kafka_error(exc, f"producing a message to {message.topic}")
            if error.fatal:
                self._replace_client()
            raise error from exc
        producer.poll(0)

    def _drain_leftovers(self, producer: Producer, deadline: float) -> None:
        """Messages of an earlier failed batch may still be queued: settle them first so that
        an outage does not pile up copies of the same rows in the local queue."""
        if len(producer) == 0:
            return
        left = producer.flush(max(0.0, deadline - time.monotonic()))
        if left:
            raise KafkaUnavailable(
                f"{left} messages of an earlier batch are still queued for "
                f"{self._settings.bootstrap_servers}; not producing more"
            )

    def _replace_client(self) -> None:
        """After a fatal error (e.g. the idempotent producer lost its sequence state) the client
        cannot produce again: drop it and create a fresh one."""
        logger.error(
            "kafka[%s] fatal producer error: recreating the client",
            self._settings.bootstrap_servers,
        )
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.purge(in_queue=True, in_flight=False)
            producer.flush(0)
        self.start()

    def close(self) -> None:
        """Flush what is queued (bounded by the flush timeout) and drop the client."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        left = producer.flush(self._flush_timeout_s)
        if left:
            logger.warning(
                "kafka[%s] producer closed with %d messages undelivered",
                self._settings.bootstrap_servers,
                left,
            )


__all__ = [
    "DEFAULT_FLUSH_TIMEOUT_S",
    "BatchProducer",
    "Deliveries",
    "DeliveryCallback",
    "KafkaProducer",
    "ProducerMessage",
    "as_kafka_error",
    "delivery_failure",
    "kafka_headers",
    "new_client",
    "produce_in_order",
]
