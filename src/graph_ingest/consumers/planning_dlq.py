"""The planning DLQ entry of an ingest request: its coordinates, its bytes, and why.

Built by the planner worker for a request that cannot be planned, and for one whose plans kept
meeting CONFLICTs past ``PLANNER__MAX_REPLANS`` (``consumers.conflicts``). The envelope keeps the
request's original topic (the requests topic), key, value and headers: ``dlq replay`` submits
them again.
"""

from __future__ import annotations

import logging
from datetime import datetime

from graph_ingest import __version__
from graph_ingest.consumers.requests import RequestMessage
from graph_ingest.dlq.entries import dlq_id_of_position, dlq_message, entry_of
from graph_ingest.domain.dlq import AttemptRecord, DlqEnvelope, MessageHeader
from graph_ingest.domain.error_detail import ErrorContext
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.kafka.headers import trace_id_from_headers
from graph_ingest.resilience.classify import error_detail
from graph_ingest.resilience.policy import TO_DLQ, retry_advice
from graph_ingest.store.base import DlqEntry, OutboxMessage

log = logging.getLogger(__name__)


def planning_dlq_entry(
    message: RequestMessage,
    exc: BaseException,
    *,
    attempts: int,
    worker_id: str,
    at: datetime,
    dlq_topic: str,
) -> tuple[DlqEntry, OutboxMessage]:
    """The entry of ``message`` (id from its position) failed with ``exc`` after ``attempts``
    attempts, and its envelope's message for the DLQ topic."""
    detail = error_detail(
        exc,
        trace_id=trace_id_from_headers(message.headers) or new_trace_id(),
        context=ErrorContext(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            worker_id=worker_id,
            code_version=__version__,
        ),
        retry=retry_advice(TO_DLQ, ()),
    )
    envelope = DlqEnvelope(
        original_topic=message.topic,
        original_partition=message.partition,
        original_offset=message.offset,
        original_key=message.key,
        original_value=message.value,
        original_headers=tuple(MessageHeader(key=k, value=v) for k, v in message.headers),
        # The last failure is kept; the retried ones before it are counted.
        attempts=(AttemptRecord.of(detail, attempt=attempts, tier=None, at=at),),
        folded_attempts=attempts - 1,
        dead_lettered_at=at,
    )
    entry = entry_of(dlq_id_of_position(*message.position), envelope)
    log.error(
        "%s not planned after %d attempt(s): %s %s; planning DLQ entry %s",
        message.context(),
        attempts,
        detail.code,
        detail.message,
        entry.dlq_id,
    )
    return entry, dlq_message(dlq_topic, entry)


__all__ = ["planning_dlq_entry"]
