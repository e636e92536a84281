"""Submit ingest requests to ``ingest.requests``: checked, encoded, acknowledged, traced.

Every request of a call is encoded and checked before anything is sent (a batch with one bad
request sends nothing): its Avro encoding must succeed and the whole message (key, value,
headers) must fit ``topics.max_message_bytes`` — a larger document is sent as ``content_ref``
plus ``content_hash`` instead. ``submit`` returns only once the broker has acknowledged the
message (idempotent producer, ``acks=all``, from ``KafkaSettings.producer_config``).

**Submission ids.** The planner derives a plan's operation id from the document's revision and
content (DESIGN.md §3), which a producer cannot know. So what ``submit`` returns is the request's
``operation_id`` when it has one, else a *submission id* derived from the request's content
(``submission_id_of``): the same request submitted twice gets the same id, so a producer that
retries after a timeout does not create a second submission. It travels in the
``submission_id`` header; the planner records which operation (or which planning DLQ entry) each
submission became, and ``graph-ingest status <id>`` and ``submit --wait`` look it up there.

**Trace.** Every message carries a W3C ``traceparent``: the caller's, or a new trace. The planner
puts a child of it on the plan, so the trace id follows the document through every stage.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from graph_ingest.domain.request import IngestRequest
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.schemas.request_messages import Submitted, request_message
from graph_ingest.settings import Settings

logger = logging.getLogger(__name__)


class IngestProducer:
    """Produces ingest requests to ``settings.topics.requests``; the Kafka client is created in
    :meth:`start` (or by the first submit)."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topics.requests
        self._max_bytes = settings.topics.max_message_bytes
        self._producer = KafkaProducer(settings.kafka)

    def start(self) -> None:
        self._producer.start()

    def close(self) -> None:
        self._producer.close()

    def __enter__(self) -> IngestProducer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def submit(self, request: IngestRequest, *, traceparent: str | None = None) -> str:
        """Send one request; return its submission id once the broker has acknowledged it."""
        return self.submit_many([request], traceparents=[traceparent])[0].submission_id

    def submit_many(
        self,
        requests: Sequence[IngestRequest],
        *,
        traceparents: Sequence[str | None] | None = None,
    ) -> list[Submitted]:
        """Check every request, then send them all in order with one flush; return once every
        one is acknowledged (KafkaIngestError if any is not: sending the same requests again
        is safe, they keep their submission ids). ``traceparents``: one per request (None: a
        new trace)."""
        parents = list(traceparents) if traceparents is not None else [None] * len(requests)
        if len(parents) != len(requests):
            raise ValueError(f"{len(parents)} traceparents for {len(requests)} requests")
        built = [
            request_message(request, self._topic, max_bytes=self._max_bytes, traceparent=parent)
            for request, parent in zip(requests, parents, strict=True)
        ]
        if not built:
            return []
        self._producer.start()
        self._producer.produce_batch([message for message, _ in built])
        for _, submission in built:
            logger.info(
                "%s submitted %s key=%s trace=%s",
                self._topic,
                submission.submission_id,
                submission.key,
                submission.trace_id,
            )
        return [submission for _, submission in built]


__all__ = [
    "IngestProducer",
]
