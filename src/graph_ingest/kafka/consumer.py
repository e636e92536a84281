"""The typed Kafka consumer every consumer in the code goes through: one consume-and-decode path,
the partitions it owns, the pause it wants, and driver errors translated once
(:func:`open_consumer` is the one place a confluent-kafka ``Consumer`` is created). The applier
decodes plan messages with it (``consumers.plan_message.decode_message``), the planner ingest
requests (``consumers.planner.requests``); ``kafka.reader`` opens its group-less readers with
:func:`open_consumer`.

Pause is the worker's own wish (``pause_all`` / ``resume_all``), re-applied to every partition
assigned while it holds: librdkafka keeps an application pause across a reassignment, and a
partition assigned during an in-place retry would otherwise flow unpaused into memory.
Messages of a partition revoked during the very ``consume`` call that returned them are dropped
(the next owner gets them), so nothing is tracked for a partition this worker no longer owns.

A partition can be *held* at an offset until a time (:meth:`TypedConsumer.hold`): a retry-tier
partition whose head message is not due yet, a request partition whose head waits for a retry of
its planning. A held partition is paused and rewound to that offset, and resumed once it is due
(each ``consume`` checks), while every other partition flows. The hold is the consumer's own and
ends with the partition's revocation: a new owner reads the head and holds it again, so nothing
is applied early and no partition is left paused.

Every join, assignment change and leave is logged with the group, its protocol and the member id
(``kafka.membership``). Both group protocols hand partitions over incrementally: the assign
callback adds partitions (``incremental_assign``), the revoke and lost callbacks take some away
(the client unassigns them once the callback returns).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import translate_kafka_error
from graph_ingest.kafka.headers import headers_of
from graph_ingest.kafka.membership import Membership
from graph_ingest.kafka.records import Partition
from graph_ingest.schemas.errors import MalformedHeader
from graph_ingest.schemas.headers import MessageHeaders, RetryHeaders
from graph_ingest.settings.kafka import KAFKA_CLIENT_LOGGER

log = logging.getLogger(__name__)
# Client errors (a broker down: one per retry) go where librdkafka's lines go: de-duplicated.
client_log = logging.getLogger(KAFKA_CLIENT_LOGGER)

# The log record attribute of a retry-tier message's delivery: seconds after it was due.
TIER_LATENESS = "tier_lateness_s"
# A batch lingers for more messages only while they keep coming: a trickle is not held back for
# the whole linger (librdkafka's consume waits out its timeout unless the batch fills). A fetch
# response lands in the local queue at once, so 1 ms is enough; 5 ms held every lone plan 4 ms
# longer and made batches no larger at a backlog (benchmarks/latency_stages.py, throughput.py).
LINGER_GAP_S = 0.001
RevokeHandler = Callable[[set[Partition]], None]
AssignHandler = Callable[[frozenset[Partition]], None]
# Where to start reading newly assigned partitions, when the worker keeps its positions itself
# (a projector: its read tables); a partition left out starts at the group's committed offset.
StartingOffsets = Callable[[frozenset[Partition]], Mapping[Partition, int]]


class Consumed(Protocol):
    """What the consumer needs of a decoded message: where it came from."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


M = TypeVar("M", bound=Consumed)

# A message's retry headers as read once: None when it is no retry copy, the error when they are
# malformed (decoding a plan then makes the message poison).
RetryRead = RetryHeaders | MalformedHeader | None
# Turns a consumed message (its headers and retry headers already read) into what a worker needs.
Decoder = Callable[[Message, MessageHeaders, RetryRead], M]
# A fetched message a worker may use (owned, not held), with its headers and retry headers.
Usable = tuple[Message, MessageHeaders, RetryRead]


def read_retry(headers: MessageHeaders) -> RetryRead:
    try:
        return RetryHeaders.from_headers(headers)
    except MalformedHeader as exc:
        return exc


def open_consumer(config: Mapping[str, Any], *, context: str) -> Consumer:
    """A confluent-kafka consumer of ``config``; a configuration the client refuses raises our
    KafkaIngestError (``context`` says what the consumer was for)."""
    try:
        return Consumer(dict(config))
    except (KafkaException, ValueError, TypeError) as exc:
        raise translate_kafka_error(exc, context=context) from exc


class TypedConsumer(Generic[M]):
    """A subscribed consumer of ``topics`` whose messages ``decode`` turns into ``M`` (it must not
    raise: a message that does not decode is poison, kept on the ``M`` it returns). Constructing
    it touches nothing; ``start`` joins."""

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: Sequence[str],
        *,
        on_revoke: RevokeHandler,
        decode: Decoder[M],
        on_assign: AssignHandler | None = None,
        starting_offsets: StartingOffsets | None = None,
        tier_topics: Collection[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = dict(config)
        self._topics = list(topics)
        self._on_revoke = on_revoke
        self._on_assign = on_assign
        self._starting_offsets = starting_offsets
        self._decode = decode
        self._tier_topics = frozenset(tier_topics)
        self._clock = clock  # wall clock: due times travel between machines in headers
        self._consumer: Consumer | None = None
        self._owned: set[Partition] = set()
        self._paused = False
        self._held: dict[Partition, float] = {}  # tier partition -> when its head is due
        self._membership = Membership.of(self._config)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        consumer = open_consumer(self._config, context=f"consuming {', '.join(self._topics)}")
        consumer.subscribe(
            self._topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )
        self._consumer = consumer
        self._membership.joining(self._topics)

    def close(self) -> None:
        """Leave the group. Its last revoke callback runs inside (the worker commits there), so
        the client stays usable until the close has returned."""
        consumer = self._consumer
        if consumer is None:
            return
        self._membership.leaving(consumer, self._owned)
        try:
            consumer.close()
        finally:
            self._consumer = None
            self._owned.clear()
            self._held.clear()

    # -- what it owns ----------------------------------------------------------------------

    def owns(self, message: Consumed) -> bool:
        return (message.topic, message.partition) in self._owned

    @property
    def owned(self) -> frozenset[Partition]:
        return frozenset(self._owned)

    @property
    def member_id(self) -> str | None:
        """This consumer's member id in its group, once it has joined (None before)."""
        return self._membership.member

    # -- consuming -------------------------------------------------------------------------

    def consume(self, max_messages: int, timeout_s: float, linger_s: float = 0.0) -> list[M]:
        """Up to ``max_messages`` decoded messages: wait ``timeout_s`` for the first, then up to
        ``linger_s`` more for the rest while they keep coming (a pause of ``LINGER_GAP_S`` ends
        the batch). Rebalance callbacks run inside this call."""
        return [self.decode(usable) for usable in self.fetch(max_messages, timeout_s, linger_s)]

    def decode(self, usable: Usable) -> M:
        """Decode one fetched message (never raises for bad content: see the class)."""
        return self._decode(*usable)

    def fetch(self, max_messages: int, timeout_s: float, linger_s: float = 0.0) -> list[Usable]:
        """As ``consume``, but not decoded yet: each usable message with its headers and retry
        headers read, for ``decode`` (which may run on another thread)."""
        consumer = self._require()
        self._release_due()
        # poll, not consume, for the first: librdkafka's consume waits its whole timeout unless
        # the batch fills, and a lone message (a retry falling due) would wait with it.
        first = consumer.poll(timeout_s)
        if first is None:
            return []
        raw = [first]
        if max_messages > 1:
            raw.extend(consumer.consume(num_messages=max_messages - 1, timeout=0))
        deadline = time.monotonic() + linger_s
        while raw and len(raw) < max_messages and (remaining := deadline - time.monotonic()) > 0:
            more = consumer.consume(
                num_messages=max_messages - len(raw), timeout=min(remaining, LINGER_GAP_S)
            )
            if not more:
                break
            raw.extend(more)
        return list(self._usable(raw))

    def _usable(self, raw: Iterable[Message]) -> Iterable[Usable]:
        """The messages to decode, each with its headers and retry headers read once."""
        for message in raw:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal():
                    raise translate_kafka_error(error, context="consumer")
                client_log.warning("consumer error: %s", error)
                continue
            partition = (message.topic(), message.partition())
            if partition not in self._owned or partition in self._held:
                continue  # a held partition is fetched again from its head once that is due
            headers = headers_of(message)
            retry = read_retry(headers)
            if partition[0] in self._tier_topics and isinstance(retry, RetryHeaders):
                due_at = retry.due_at.timestamp()
                now = self._clock()
                if due_at > now:
                    self.hold(partition, message.offset() or 0, due_at)
                    continue
                log.debug(
                    "%s[%d]@%d delivered %.3fs after it was due",
                    *partition,
                    message.offset(),
                    now - due_at,
                    extra={TIER_LATENESS: now - due_at},
                )
            yield message, headers, retry

    # -- holds: a partition waits for its head to be due -----------------------------------

    def hold(self, partition: Partition, offset: int, due_at: float) -> None:
        """Pause ``partition`` until ``due_at`` (epoch seconds), rewound to ``offset`` (what was
        fetched from there on is fetched again once it is due). Other partitions keep flowing."""
        consumer = self._require()
        consumer.pause([TopicPartition(*partition)])
        consumer.seek(TopicPartition(partition[0], partition[1], offset))
        self._held[partition] = due_at
        log.debug("%s[%d]@%d due in %.3fs: held", *partition, offset, due_at - self._clock())

    def _release_due(self) -> None:
        now = self._clock()
        due = [partition for partition, due_at in self._held.items() if due_at <= now]
        for partition in due:
            del self._held[partition]
        if due and not self._paused:
            self._require().resume([TopicPartition(*partition) for partition in due])

    def next_due_in(self) -> float | None:
        """Seconds until the earliest held tier message is due; None when none is held."""
        if not self._held:
            return None
        return max(min(self._held.values()) - self._clock(), 0.0)

    # -- pausing ---------------------------------------------------------------------------

    def pause_all(self) -> None:
        self._paused = True
        self._set_paused(self._owned)

    def resume_all(self) -> None:
        self._paused = False
        self._set_paused(self._owned)

    def _set_paused(self, partitions: Iterable[Partition]) -> None:
        consumer = self._require()
        if self._paused:
            listed = [TopicPartition(*partition) for partition in partitions]
        else:  # a held tier partition stays paused until its head is due
            listed = [TopicPartition(*p) for p in partitions if p not in self._held]
        if not listed:
            return
        if self._paused:
            consumer.pause(listed)
        else:
            consumer.resume(listed)

    # -- offsets ---------------------------------------------------------------------------

    def group_metadata(self) -> object:
        """The consumer group metadata a transactional producer commits offsets with."""
        return self._require().consumer_group_metadata()

    def rewind(self, offsets: Mapping[Partition, int]) -> None:
        """Fetch the owned partitions of ``offsets`` again from those offsets (what was consumed
        from there on was not committed: an aborted transaction)."""
        consumer = self._require()
        for (topic, part), offset in offsets.items():
            if (topic, part) in self._owned:
                consumer.seek(TopicPartition(topic, part, offset))

    def rewind_to_committed(self, timeout_s: float) -> dict[Partition, int]:
        """Fetch every owned partition again from the group's committed offset (after a
        transaction whose outcome this worker does not know); return those offsets (negative:
        none committed, read from the start). Raises KafkaIngestError if the group coordinator
        does not answer within ``timeout_s``."""
        consumer = self._require()
        listed = [TopicPartition(topic, part) for topic, part in sorted(self._owned)]
        if not listed:
            return {}
        try:
            committed = consumer.committed(listed, timeout=timeout_s)
        except KafkaException as exc:
            raise translate_kafka_error(exc, context="reading the committed offsets") from exc
        rewound: dict[Partition, int] = {}
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:  # not fetching yet: it starts from the committed one
                log.debug("%s[%d] not rewound: %s", tp.topic, tp.partition, exc)
            rewound[(tp.topic, tp.partition)] = tp.offset
        return rewound

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
        assigned = {(tp.topic, tp.partition) for tp in partitions}
        if self._starting_offsets is not None:
            # Set in the assignment itself: a seek inside the callback fails (erroneous state),
            # and one after it races the fetch of the committed offset.
            starts = self._starting_offsets(frozenset(assigned))
            partitions = [
                TopicPartition(
                    tp.topic, tp.partition, starts.get((tp.topic, tp.partition), tp.offset)
                )
                for tp in partitions
            ]
        consumer.incremental_assign(partitions)
        self._owned |= assigned
        self._set_paused(assigned)
        self._membership.changed(consumer, "assigned", assigned, self._owned, self._paused)
        if self._on_assign is not None:
            self._on_assign(frozenset(assigned))

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(consumer, "revoked", partitions)

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Taken away without a revocation (the session expired, or the member was fenced):
        they may already have a new owner, so what the worker commits now is refused."""
        self._give_up(consumer, "lost", partitions)

    def _give_up(self, consumer: Consumer, change: str, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._on_revoke(gone)  # while still owned: the worker commits what is done
        self._owned -= gone
        for partition in gone:
            self._held.pop(partition, None)  # its next owner reads the head and holds it anew
        self._membership.changed(consumer, change, gone, self._owned, self._paused)

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise GraphIngestError(
                "TypedConsumer used before start()", code=StatusCode.FAILED_PRECONDITION
            )
        return self._consumer


__all__ = [
    "TIER_LATENESS",
    "Partition",
    "RetryRead",
    "StartingOffsets",
    "TypedConsumer",
    "Usable",
    "open_consumer",
    "read_retry",
]
