"""The applier's Kafka consumer: one consume-and-decode path, the partitions it owns, the pause it
wants, and driver errors translated once.

Pause is the worker's own wish (``pause_all`` / ``resume_all``), re-applied to every partition
assigned while it holds: librdkafka keeps an application pause across a reassignment, and a
partition assigned during an in-place retry would otherwise flow unpaused into memory.
Messages of a partition revoked during the very ``consume`` call that returned them are dropped
(the next owner gets them), so nothing is tracked for a partition this worker no longer owns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from graph_ingest.consumers.messages import PlanMessage
from graph_ingest.domain.status import StatusCode
from graph_ingest.errors import GraphIngestError
from graph_ingest.kafka.errors import translate_kafka_error
from graph_ingest.schemas.codec import decode_plan

log = logging.getLogger(__name__)

Partition = tuple[str, int]
RevokeHandler = Callable[[set[Partition]], None]


def decode_message(message: Message) -> PlanMessage:
    """Decode and verify one plan message; any failure is kept on the message, never raised.

    Third-party code (fastavro, pydantic, the RFC 8785 canonicaliser) raises its own exceptions on
    hostile input: every one of them makes the message poison, not the worker's death."""
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
    except Exception as exc:
        error = GraphIngestError(
            f"plan cannot be verified: {type(exc).__name__}: {exc}",
            code=StatusCode.INVALID_ARGUMENT,
        )
        error.__cause__ = exc
        return PlanMessage(**position, error=error)
    return PlanMessage(**position, plan=plan)


class PlanConsumer:
    """A subscribed consumer of plan topics. Constructing it touches nothing; ``start`` joins."""

    def __init__(
        self, config: Mapping[str, Any], topics: Sequence[str], *, on_revoke: RevokeHandler
    ) -> None:
        self._config = dict(config)
        self._topics = list(topics)
        self._on_revoke = on_revoke
        self._consumer: Consumer | None = None
        self._owned: set[Partition] = set()
        self._paused = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        consumer = Consumer(self._config)
        consumer.subscribe(
            self._topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._consumer = consumer

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    # -- what it owns ----------------------------------------------------------------------

    def owns(self, message: PlanMessage) -> bool:
        return (message.topic, message.partition) in self._owned

    @property
    def owned(self) -> frozenset[Partition]:
        return frozenset(self._owned)

    # -- consuming -------------------------------------------------------------------------

    def consume(
        self, max_messages: int, timeout_s: float, linger_s: float = 0.0
    ) -> list[PlanMessage]:
        """Up to ``max_messages`` decoded messages: wait ``timeout_s`` for the first, then up to
        ``linger_s`` more for the rest. Rebalance callbacks run inside this call."""
        consumer = self._require()
        raw = consumer.consume(num_messages=max_messages, timeout=timeout_s)
        deadline = time.monotonic() + linger_s
        while raw and len(raw) < max_messages and (remaining := deadline - time.monotonic()) > 0:
            more = consumer.consume(num_messages=max_messages - len(raw), timeout=remaining)
            if not more:
                break
            raw.extend(more)
        return [decode_message(m) for m in self._usable(raw)]

    def _usable(self, raw: Iterable[Message]) -> Iterable[Message]:
        for message in raw:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal():
                    raise translate_kafka_error(error, context="consumer")
                log.warning("consumer error: %s", error)
                continue
            if (message.topic(), message.partition()) in self._owned:
                yield message

    # -- pausing ---------------------------------------------------------------------------

    def pause_all(self) -> None:
        self._paused = True
        self._set_paused(self._owned)

    def resume_all(self) -> None:
        self._paused = False
        self._set_paused(self._owned)

    def _set_paused(self, partitions: Iterable[Partition]) -> None:
        consumer = self._require()
        listed = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not listed:
            return
        if self._paused:
            consumer.pause(listed)
        else:
            consumer.resume(listed)

    # -- offsets ---------------------------------------------------------------------------

    def commit(self, offsets: Mapping[Partition, int]) -> dict[Partition, int]:
        """Commit the offsets of partitions still owned; return what was committed ({} when a
        rebalance raced the commit: the next owner re-applies, idempotently)."""
        owned = {tp: offset for tp, offset in offsets.items() if tp in self._owned}
        if not owned:
            return {}
        listed = [TopicPartition(topic, part, offset) for (topic, part), offset in owned.items()]
        try:
            self._require().commit(offsets=listed, asynchronous=False)
        except Exception as exc:
            log.warning("offset commit failed (%s); messages will be redelivered", exc)
            return {}
        return owned

    # -- rebalance callbacks ---------------------------------------------------------------

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        assigned = {(tp.topic, tp.partition) for tp in partitions}
        self._owned |= assigned
        self._set_paused(assigned)
        log.info("partitions assigned: %s%s", sorted(assigned), " (paused)" if self._paused else "")

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        self._on_revoke(revoked)  # while still owned: the worker commits what is done
        self._owned -= revoked
        log.info("partitions revoked: %s", sorted(revoked))

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise GraphIngestError(
                "PlanConsumer used before start()", code=StatusCode.FAILED_PRECONDITION
            )
        return self._consumer


__all__ = ["PlanConsumer", "decode_message"]
