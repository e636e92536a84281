"""Force a dependency's circuit breaker for every worker of the group: publish the operator's word
to the compacted control topic (``ingestion.control``) that every applier follows
(``kafka.control``). The CLI's ``breaker open|close|release`` and the admin API call :func:`force`.

Not a call to each worker: a worker started later reads the topic from its beginning and obeys
the same word. ``force`` returns once the broker has acknowledged the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from graph_ingest.domain.breaker_control import KNOWN_DEPENDENCIES, BreakerControl, BreakerMode
from graph_ingest.domain.errors import DomainError
from graph_ingest.kafka.admin import control_topic_spec, create_topics
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.schemas.messages import breaker_control_message
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)


class UnknownDependency(DomainError):
    """A breaker no worker keeps."""


def force(
    settings: Settings,
    dependency: str,
    mode: BreakerMode,
    *,
    by: str,
    reason: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> BreakerControl:
    """Set ``dependency``'s breaker to ``mode`` for every worker; the record as published.
    Raises :class:`UnknownDependency` (naming the known ones) before anything is sent."""
    if dependency not in KNOWN_DEPENDENCIES:
        known = ", ".join(KNOWN_DEPENDENCIES)
        raise UnknownDependency(f"no breaker for {dependency!r}; the known dependencies: {known}")
    control = BreakerControl(dependency=dependency, mode=mode, by=by, reason=reason, at=clock())
    create_topics(settings, [control_topic_spec(settings.topics)])
    with KafkaProducer(settings.kafka) as producer:
        producer.produce_batch([breaker_control_message(control, settings.topics.control)])
    log.warning("breaker %s set to %s by %s: %s", dependency, mode, by, reason or "(no reason)")
    return control


__all__ = ["UnknownDependency", "force"]
