"""Publish a worker's degradation events (``ingestion.degradation``) without holding up its loop.

Telemetry, best effort. :meth:`DegradationPublisher.publish` hands the event to the Kafka client
and returns (it serves due delivery reports with ``poll(0)``, it never waits for an
acknowledgement); :meth:`~DegradationPublisher.close` flushes, for at most ``flush_timeout_s``. An
outage of Kafka itself never reaches the caller: an event the client refuses (its local queue is
full, a fatal client error), one the broker never acknowledges, and one still queued when the
publisher closes are logged as a warning, counted in ``dropped`` and dropped. Nothing else depends
on them: a reader of the topic may miss a change, and the worker's next change states its level
again.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, Message

from graph_ingest.domain.degradation import DegradationEvent
from graph_ingest.kafka.errors import KafkaIngestError
from graph_ingest.kafka.producer import DeliveryCallback, KafkaProducer
from graph_ingest.schemas.messages import degradation_message
from graph_ingest.settings import Settings

logger = logging.getLogger(__name__)

TELEMETRY_FLUSH_TIMEOUT_S = 5.0


class DegradationPublisher:
    """Produces degradation events to ``settings.topics.degradation``; the Kafka client is created
    in :meth:`start` (or by the first :meth:`publish`), never in ``__init__``."""

    def __init__(
        self, settings: Settings, *, flush_timeout_s: float = TELEMETRY_FLUSH_TIMEOUT_S
    ) -> None:
        self._topic = settings.topics.degradation
        self._producer = KafkaProducer(settings.kafka, flush_timeout_s=flush_timeout_s)
        self._in_flight = 0
        self.dropped = 0
        """Events given to :meth:`publish` that did not reach Kafka (or not within the flush)."""

    def start(self) -> None:
        """Create the Kafka client; a configuration the client refuses raises here."""
        self._producer.start()

    def close(self) -> None:
        """Flush what is still queued (bounded); what is left then is dropped."""
        self._producer.close()
        self.dropped += self._in_flight
        self._in_flight = 0

    def __enter__(self) -> DegradationPublisher:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def publish(self, event: DegradationEvent) -> bool:
        """Hand ``event`` to the Kafka client without waiting for it to be acknowledged; True if
        the client took it, False if it was dropped (a warning says why). Never raises for Kafka
        being away."""
        message = degradation_message(event, self._topic)
        self.start()  # idempotent
        try:
            self._producer.produce_nowait(message, self._on_delivery(event))
        except KafkaIngestError as exc:
            self._drop(event, exc)
            return False
        self._in_flight += 1
        return True

    def _on_delivery(self, event: DegradationEvent) -> DeliveryCallback:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            self._in_flight -= 1
            if err is not None:
                self._drop(event, err)

        return on_delivery

    def _drop(self, event: DegradationEvent, why: KafkaIngestError | KafkaError) -> None:
        self.dropped += 1
        logger.warning(
            "%s: degradation event of %s (%s -> %s at %s) dropped: %s",
            self._topic,
            event.worker_id,
            event.previous_level,
            event.level,
            event.at.isoformat(),
            why,
        )


__all__ = [
    "TELEMETRY_FLUSH_TIMEOUT_S",
    "DegradationPublisher",
]
