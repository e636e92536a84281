"""The applier's Kafka loop: poll a batch, apply it, commit offsets only after outcomes are durable.

Transient failures retry the whole batch in place with backoff while every assigned partition is
paused (the consumer keeps polling, so it stays in its group). SIGTERM (a set ``stop`` event)
finishes the batch in hand, commits, and leaves the group.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from graph_ingest.consumers.applier import Outcome, PlanApplier
from graph_ingest.consumers.batching import OffsetTracker, select_batch
from graph_ingest.consumers.messages import PlanMessage
from graph_ingest.domain.status import StatusCode
from graph_ingest.errors import GraphIngestError
from graph_ingest.kafka.errors import translate_kafka_error
from graph_ingest.resilience.backoff import backoff_delay
from graph_ingest.resilience.classify import classify
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)


def decode_message(message: Message) -> PlanMessage:
    """Decode and verify one plan message; failures are kept on the message, never raised."""
    headers = dict(message.headers() or ())
    op_header = headers.get("operation_id")
    position: dict[str, Any] = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "key": message.key(),
        "value": message.value(),
        "operation_id_header": (
            op_header.decode("utf-8", "replace") if isinstance(op_header, bytes) else op_header
        ),
    }
    value = message.value()
    if not value:
        error = GraphIngestError("empty plan message", code=StatusCode.INVALID_ARGUMENT)
        return PlanMessage(**position, error=error)
    try:
        plan = decode_plan(value)
        plan.verify_fingerprint()
    except GraphIngestError as exc:
        return PlanMessage(**position, error=exc)
    return PlanMessage(**position, plan=plan)


class ApplierWorker:
    def __init__(
        self,
        settings: Settings,
        applier: PlanApplier,
        *,
        topics: Sequence[str] | None = None,
        max_internal_retries: int = 3,
    ) -> None:
        self._settings = settings
        self._applier = applier
        self._topics = list(topics or [settings.topics.plans])
        self._max_internal_retries = max_internal_retries
        self._tracker = OffsetTracker()
        self._pending: list[PlanMessage] = []
        self._committed: dict[tuple[str, int], int] = {}
        self._consumer: Consumer | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        settings = self._settings.applier
        consumer = Consumer(self._settings.kafka.consumer_config(settings.group_id))
        self._consumer = consumer
        consumer.subscribe(self._topics, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        log.info("applier consuming %s as group %s", self._topics, settings.group_id)
        try:
            while not stop.is_set():
                self._pending.extend(self._poll(consumer))
                if not self._pending:
                    continue
                batch, self._pending = select_batch(
                    self._pending, settings.batch_max_plans, settings.batch_max_bytes
                )
                if self._apply_with_retry(consumer, batch, stop) is None:
                    break
                self._tracker.done(batch)
                self._commit(consumer)
        finally:
            self._commit(consumer)
            consumer.close()
            log.info("applier stopped")

    # -- polling ---------------------------------------------------------------------------

    def _poll(self, consumer: Consumer) -> list[PlanMessage]:
        settings = self._settings.applier
        want = max(settings.batch_max_plans - len(self._pending), 1)
        raw = consumer.consume(num_messages=want, timeout=settings.poll_timeout_s)
        deadline = time.monotonic() + settings.batch_linger_s
        while raw and len(raw) < want and (remaining := deadline - time.monotonic()) > 0:
            more = consumer.consume(num_messages=want - len(raw), timeout=remaining)
            if not more:
                break
            raw.extend(more)
        messages = []
        for message in raw:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal():
                    raise translate_kafka_error(error)
                log.warning("consumer error: %s", error)
                continue
            messages.append(decode_message(message))
        self._tracker.consumed(messages)
        return messages

    # -- applying --------------------------------------------------------------------------

    def _apply_with_retry(
        self, consumer: Consumer, batch: list[PlanMessage], stop: threading.Event
    ) -> dict[tuple[str, int, int], Outcome] | None:
        """Apply until it succeeds; None if asked to stop first (nothing committed for it)."""
        attempt = internal_failures = 0
        settings = self._settings.applier
        while True:
            try:
                return self._applier.apply(
                    batch, internal_is_permanent=internal_failures >= self._max_internal_retries
                )
            except Exception as exc:
                code = classify(exc)
                if not code.is_transient:
                    raise
                attempt += 1
                internal_failures += code is StatusCode.INTERNAL
                delay = backoff_delay(
                    attempt, settings.retry_initial_backoff_s, settings.retry_max_backoff_s
                )
                log.warning(
                    "batch of %d (first %s) failed with %s (%s: %s); retry %d in %.1fs",
                    len(batch),
                    batch[0].context(),
                    code,
                    type(exc).__name__,
                    exc,
                    attempt,
                    delay,
                )
                if not self._paused_wait(consumer, delay, stop):
                    return None

    def _paused_wait(self, consumer: Consumer, delay: float, stop: threading.Event) -> bool:
        """Wait ``delay`` seconds polling a paused consumer; False if ``stop`` was set."""
        assignment = consumer.assignment()
        consumer.pause(assignment)
        try:
            deadline = time.monotonic() + delay
            while (remaining := deadline - time.monotonic()) > 0:
                if stop.is_set():
                    return False
                message = consumer.poll(min(remaining, 0.5))
                if message is not None and message.error() is None:
                    decoded = decode_message(message)
                    self._tracker.consumed([decoded])
                    self._pending.append(decoded)
            return not stop.is_set()
        finally:
            consumer.resume(consumer.assignment())

    # -- offsets ---------------------------------------------------------------------------

    def _commit(self, consumer: Consumer) -> None:
        owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        offsets = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in self._tracker.committable().items()
            if (topic, partition) in owned and self._committed.get((topic, partition)) != offset
        ]
        if not offsets:
            return
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # a rebalance raced us: the next owner re-applies, idempotently
            log.warning("offset commit failed (%s); messages will be redelivered", exc)
            return
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        self._commit(consumer)
        self._tracker.forget(revoked)
        self._pending = [m for m in self._pending if (m.topic, m.partition) not in revoked]
        for tp in revoked:
            self._committed.pop(tp, None)
        log.info("partitions revoked: %s", sorted(revoked))
