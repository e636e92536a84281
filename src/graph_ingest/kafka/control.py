"""Follow the compacted breaker-control topic (``ingestion.control``): the latest operator's word
on each dependency's breaker, kept current on a background thread for a worker's loops.

No consumer group: the follower assigns every partition from the beginning itself (each worker
must read every record, and a group would share them out), commits nothing, and reads to the end
before :meth:`ControlFollower.start` returns, so a worker started after a force-open starts
paused. The loops read :meth:`~ControlFollower.controls`, an immutable mapping swapped whole on a
change: one attribute read per round, never a Kafka call. A record that does not decode (or
whose key is not its dependency) is logged and skipped: the previous word on that dependency
stands; a tombstone releases the dependency (back to automatic).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from types import MappingProxyType

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from graph_ingest.domain.breaker_control import BreakerControl
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.admin import control_topic_spec, create_topics
from graph_ingest.kafka.errors import KafkaIngestError, translate_kafka_error
from graph_ingest.kafka.reader import open_reader, partitions_of
from graph_ingest.schemas.codec import decode_breaker_control
from graph_ingest.schemas.errors import DecodeError
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)

_POLL_S = 0.2
"""How long one poll of the follower waits: how soon a new word reaches the loops, at most."""
CATCH_UP_TIMEOUT_S = 60.0


class ControlFollower:
    """The latest :class:`BreakerControl` per dependency; the client is created in
    :meth:`start`, never in ``__init__``."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = settings.topics.control
        self._controls: Mapping[str, BreakerControl] = MappingProxyType({})
        self._consumer: Consumer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def controls(self) -> Mapping[str, BreakerControl]:
        """The operators' word per dependency as last read (no entry: never forced)."""
        return self._controls

    def start(self, *, follow: bool = True, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        """Create the topic if absent, read it to its end, then (``follow``) keep up on a
        daemon thread. Raises KafkaIngestError when the end is not reached in ``timeout_s``."""
        create_topics(self._settings, [control_topic_spec(self._settings.topics)])
        consumer = self._consumer = open_reader(self._settings.kafka, self._topic)
        partitions = partitions_of(consumer, self._topic, timeout_s)
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout_s
        at_end: set[int] = set()
        while at_end < set(partitions):
            if time.monotonic() >= deadline:
                raise KafkaIngestError(
                    f"{self._topic}: not read to its end within {timeout_s:g}s",
                    code=StatusCode.DEADLINE_EXCEEDED,
                )
            at_end |= self._take(consumer.consume(100, timeout=_POLL_S))
        if follow:
            self._thread = threading.Thread(target=self._follow, name="control", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def __enter__(self) -> ControlFollower:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _follow(self) -> None:
        consumer = self._consumer
        assert consumer is not None  # started
        while not self._stop.is_set():
            try:
                self._take(consumer.consume(100, timeout=_POLL_S))
            except Exception:  # the thread must outlive a bad moment; the loops keep the last word
                log.exception("%s: following failed; trying again", self._topic)
                self._stop.wait(1.0)

    def _take(self, messages: list[Message]) -> set[int]:
        """Fold ``messages`` into the controls; the partitions whose end they reported."""
        at_end: set[int] = set()
        changed = dict(self._controls)
        for message in messages:
            error = message.error()
            if error is None:
                self._fold(changed, message)
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition() or 0)
            elif error.fatal():
                raise translate_kafka_error(error, context=f"reading {self._topic}")
            else:  # a broker away for a moment: librdkafka retries
                log.warning("%s follower: %s", self._topic, error)
        if changed != self._controls:
            self._controls = MappingProxyType(changed)
        return at_end

    def _fold(self, controls: dict[str, BreakerControl], message: Message) -> None:
        where = f"{self._topic}[{message.partition()}]@{message.offset()}"
        key = (message.key() or b"").decode("utf-8", errors="replace")
        value = message.value()
        if value is None:
            controls.pop(key, None)
            log.info("%s: %s released (tombstone)", where, key)
            return
        try:
            control = decode_breaker_control(value)
            if control.dependency != key:
                raise DecodeError(
                    f"key {key!r} is not its dependency {control.dependency!r}", raw=value
                )
        except DecodeError as exc:
            log.error(
                "%s: breaker control skipped, the last word on %r stands: %s", where, key, exc
            )
            return
        if controls.get(key) != control:
            log.info(
                "%s: breaker %s %s by %s at %s: %s",
                where,
                key,
                control.mode,
                control.by,
                control.at.isoformat(),
                control.reason,
            )
        controls[key] = control


def read_controls(
    settings: Settings, *, timeout_s: float = CATCH_UP_TIMEOUT_S
) -> dict[str, BreakerControl]:
    """The operators' word per dependency now (the control topic read once to its end)."""
    follower = ControlFollower(settings)
    try:
        follower.start(follow=False, timeout_s=timeout_s)
        return dict(follower.controls())
    finally:
        follower.close()


__all__ = ["CATCH_UP_TIMEOUT_S", "ControlFollower", "read_controls"]
