"""The planner's transactional producer, and taking its transactional.id over again after the
producer gave a client up.

The producer gives its client up when a transaction could not be aborted (a commit that timed out
may be in progress) or when a call overran its timeout (a broker outage can leave librdkafka
waiting for a lost coordinator without a bound). Such a transaction may have committed, plans,
offsets and all. Before anything else the worker takes the transactional.id over with a new
client, retrying while Kafka is away: initialising it settles the old transaction (committed or
aborted) and fences the old client. Then every owned partition is read again from its committed
offset, the only record of which it was, so a batch that committed after all is not planned twice
and one that did not is planned again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from graph_ingest.kafka.errors import KafkaIngestError, ProducerFenced
from graph_ingest.kafka.records import Partition
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)


class Rewindable(Protocol):
    def rewind_to_committed(self, timeout_s: float) -> Mapping[Partition, int]: ...


def planner_producer(settings: Settings) -> TransactionalProducer:
    """The planner's transactional producer (transactional.id from ``settings.planner``)."""
    return TransactionalProducer(
        settings.kafka,
        settings.planner.transactional_id,
        timeout_s=settings.planner.transaction_timeout_s,
    )


class TakeOver:
    """Whether the worker must take over again before its next batch, and doing it."""

    def __init__(
        self,
        producer: TransactionalProducer,
        consumers: Sequence[Rewindable],
        *,
        timeout_s: float,
    ) -> None:
        self._producer = producer
        self._consumers = consumers
        self._timeout_s = timeout_s
        self._pending = False

    def due(self) -> bool:
        """True from the moment the producer has no client until :meth:`settle` succeeded."""
        self._pending = self._pending or not self._producer.ready
        return self._pending

    def settle(self) -> bool:
        """Take over (unless done already) and read every owned partition again from its
        committed offset; False, said in a WARNING, while Kafka does not answer."""
        name = self._producer.transactional_id
        try:
            if not self._producer.ready:
                self._producer.take_over()
            rewound = {
                f"{topic}[{part}]": offset
                for consumer in self._consumers
                for (topic, part), offset in consumer.rewind_to_committed(self._timeout_s).items()
            }
        except ProducerFenced:
            raise  # another worker runs under this transactional.id: this one must stop
        except KafkaIngestError as exc:
            log.warning(
                "planner could not take over transactional.id %s yet (%s: %s): trying again",
                name,
                type(exc).__name__,
                exc,
            )
            return False
        self._pending = False
        log.warning(
            "planner took over transactional.id %s with a new client; reading again from the "
            "committed offsets %s",
            name,
            dict(sorted(rewound.items())),
        )
        return True


__all__ = ["Rewindable", "TakeOver", "planner_producer"]
