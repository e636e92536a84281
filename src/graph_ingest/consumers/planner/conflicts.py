"""The planner worker's side of a CONFLICT: replan the newest request of the document.

The worker reads the operations topic (operation snapshots, ``read_committed``) in a group of its
own (``PLANNER__GROUP_ID`` + ``.conflicts``), between its batches of requests. For each CONFLICT
snapshot (``producers.replans.on_conflict`` decides):

* REPLAN: the request that was planned as the conflicted operation is read again from the
  requests topic at its recorded position and submitted again, key, value and headers, with
  ``replan_of`` and ``replan_attempt`` (``ingest_replans``: REQUESTED). The planner plans it on the
  committed state (``consumers.planner.worker``);
* DEAD_LETTER: past ``PLANNER__MAX_REPLANS``, the request becomes a planning DLQ entry instead
  (``consumers.planner.planning_dlq``: the entry it was replayed from, when it was);
* SUPERSEDED (a newer request of the document was planned: recorded), DUPLICATE, IGNORE (no
  planner planned it): nothing is sent.

**Exactly once per CONFLICT.** The records go to PostgreSQL first; then the re-submitted requests
(or DLQ envelopes) and the offsets of the snapshots go in one Kafka transaction of the worker's
producer: a crash or a failure before the commit leaves nothing visible and the snapshots are
read again. A CONFLICT snapshot published twice (the relay is at-least-once) finds the submission
replanned already (DUPLICATE); and should two copies of one replan reach the planner, the second
is dropped there (``replan_standing``), or is the same plan again (a duplicate the applier
acknowledges).

A new ``.conflicts`` group starts at the beginning of the operations topic: CONFLICTs from before
the worker ever ran are replanned too, if their request is still the newest of its document.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from confluent_kafka import Message, TopicPartition

from graph_ingest.consumers.planner.planning_dlq import PlanningFailure, dead_letter_requests
from graph_ingest.consumers.planner.requests import RequestMessage
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.consumer import RetryRead, TypedConsumer
from graph_ingest.kafka.errors import ProducerFenced
from graph_ingest.kafka.reader import read_at
from graph_ingest.kafka.records import Partition
from graph_ingest.kafka.transactional import TransactionalProducer
from graph_ingest.producers.replans import (
    ConflictAction,
    ReplanMark,
    on_conflict,
    replan_marks,
)
from graph_ingest.schemas.codec import decode_operation
from graph_ingest.schemas.headers import MessageHeaders
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.schemas.request_messages import resubmitted_request
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission

log = logging.getLogger(__name__)


class ReplansExhausted(GraphIngestError):
    """The request's plans kept meeting CONFLICTs: it was replanned as often as allowed."""

    code = StatusCode.ABORTED


@dataclass(frozen=True, slots=True)
class OperationMessage:
    topic: str
    partition: int
    offset: int
    operation: Operation | None
    """None for a message that is no operation snapshot (a tombstone, garbage): skipped."""


def decode_operation_message(
    message: Message, _headers: MessageHeaders, _retry: RetryRead
) -> OperationMessage:
    value = message.value()
    try:
        operation = decode_operation(value) if value else None
    except Exception:  # hostile bytes may raise anything in third-party code: not ours to act on
        log.warning(
            "%s[%s]@%s is no operation snapshot: skipped",
            message.topic(),
            message.partition(),
            message.offset(),
        )
        operation = None
    return OperationMessage(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        operation=operation,
    )


@dataclass
class _Batch:
    replans: list[Replan] = field(default_factory=list)
    dead: list[tuple[PlanningFailure, Replan]] = field(default_factory=list)
    """Requests to dead-letter, with their DEAD_LETTERED replan (its DLQ id set when written)."""
    outgoing: list[OutboxMessage] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    """Operations handled in this batch: a second snapshot of one is a duplicate."""


class ConflictWatcher:
    def __init__(
        self,
        settings: Settings,
        store: OperationStore,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._store = store
        self._clock = clock
        self._consumer: TypedConsumer[OperationMessage] = TypedConsumer(
            settings.kafka.consumer_config(settings.planner.conflicts_group_id),
            [settings.topics.operations],
            on_revoke=lambda _revoked: None,
            decode=decode_operation_message,
        )

    def start(self) -> None:
        self._consumer.start()

    def close(self) -> None:
        self._consumer.close()

    def rewind_to_committed(self, timeout_s: float) -> dict[Partition, int]:
        """Read the snapshots again from the committed offsets (after a take-over settled a
        transaction of unknown outcome)."""
        return self._consumer.rewind_to_committed(timeout_s)

    def step(self, producer: TransactionalProducer) -> bool:
        """Handle the snapshots that have arrived (none waited for); False if they could not be
        (they are read again next time)."""
        settings = self._settings.planner
        messages = self._consumer.consume(settings.batch_max_requests, 0.0)
        if not messages:
            return True
        offsets: dict[Partition, int] = {}
        for message in messages:
            partition = (message.topic, message.partition)
            offsets[partition] = max(offsets.get(partition, 0), message.offset + 1)
        try:
            batch = _Batch()
            for message in messages:
                operation = message.operation
                if operation is not None and operation.stage is Stage.CONFLICT:
                    self._conflict(operation, batch)
            with self._store.unit_of_work() as uow:
                dead = dead_letter_requests(
                    uow,
                    [failure for failure, _ in batch.dead],
                    worker_id=settings.worker_id,
                    dlq_topic=self._settings.topics.dlq,
                )
                dead_lettered = [
                    replace(replan, dlq_id=entry.dlq_id)
                    for (_, replan), entry in zip(batch.dead, dead.entries, strict=True)
                ]
                uow.record_replans([*batch.replans, *dead_lettered])
            producer.produce_transaction(
                [*batch.outgoing, *dead.messages],
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                group_metadata=self._consumer.group_metadata(),
            )
        except ProducerFenced:
            raise
        except Exception as exc:
            log.warning(
                "%d operation snapshot(s) not handled (%s: %s): reading them again",
                len(messages),
                type(exc).__name__,
                exc,
            )
            firsts: dict[Partition, int] = {}
            for message in messages:
                firsts.setdefault((message.topic, message.partition), message.offset)
            self._consumer.rewind(firsts)  # a producer that gave its client up: the worker
            return False  # takes over and calls rewind_to_committed
        return True

    def _conflict(self, operation: Operation, batch: _Batch) -> None:
        op_id = operation.operation_id
        submission = self._store.submission_of_operation(op_id)
        action, attempt = self._decide(op_id, submission, batch)
        log.info(
            "op=%s CONFLICT (%s/%s): %s", op_id, operation.space, operation.document_id, action
        )
        if submission is None or action in (ConflictAction.IGNORE, ConflictAction.DUPLICATE):
            return
        replan = Replan(
            operation_id=op_id,
            submission_id=submission.submission_id,
            attempt=attempt,
            outcome=ReplanOutcome.SUPERSEDED,
            at=self._clock(),
        )
        if action is ConflictAction.SUPERSEDED:
            batch.replans.append(replan)
            return
        request, lost = self._request_of(submission)
        if action is ConflictAction.DEAD_LETTER or lost is not None:
            failure = PlanningFailure(
                request, lost or self._exhausted(operation), attempts=attempt, at=replan.at
            )
            batch.dead.append((failure, replace(replan, outcome=ReplanOutcome.DEAD_LETTERED)))
            return
        batch.outgoing.append(
            resubmitted_request(
                self._settings.topics.requests,
                request.key,
                request.value,
                request.headers,
                replan_marks(ReplanMark(op_id, attempt)),
            )
        )
        batch.replans.append(replace(replan, outcome=ReplanOutcome.REQUESTED))

    def _decide(
        self, op_id: str, submission: Submission | None, batch: _Batch
    ) -> tuple[ConflictAction, int]:
        """What to do about the CONFLICT of ``op_id`` (``replans.on_conflict``; a second snapshot
        of it in the batch is a duplicate), and the replan attempt it would be."""
        newest = (
            self._store.newest_submission(submission.space, submission.document_id)
            if submission
            else None
        )
        made_by = self._store.replan_making(op_id)
        attempt = (made_by.attempt if made_by else 0) + 1
        action = (
            ConflictAction.DUPLICATE
            if op_id in batch.done
            else on_conflict(
                op_id,
                submission,
                newest,
                attempt=attempt,
                max_replans=self._settings.planner.max_replans,
            )
        )
        batch.done.add(op_id)
        return action, attempt

    def _exhausted(self, operation: Operation) -> ReplansExhausted:
        return ReplansExhausted(
            f"operation {operation.operation_id} of {operation.space}/{operation.document_id} met "
            f"a CONFLICT after {self._settings.planner.max_replans} replan(s) "
            "(PLANNER__MAX_REPLANS): the document keeps moving on under its plans; replay the "
            "entry to plan it again"
        )

    def _request_of(self, submission: Submission) -> tuple[RequestMessage, GraphIngestError | None]:
        """The request as it was submitted, read again at its recorded position; or its position
        and why it cannot be replanned (gone from the topic)."""
        topic, partition, offset = submission.source
        record = read_at(self._settings.kafka, topic, partition, offset)
        found = RequestMessage(
            topic=topic,
            partition=partition,
            offset=offset,
            key=None if record is None else record.key,
            value=None if record is None else record.value,
            headers=() if record is None else record.headers,
        )
        if record is not None:
            return found, None
        return found, GraphIngestError(
            f"the request of submission {submission.submission_id} is no longer at "
            f"{topic}[{partition}]@{offset} (retention?): it cannot be replanned",
            code=StatusCode.DATA_LOSS,
        )


__all__ = ["ConflictWatcher", "OperationMessage", "ReplansExhausted", "decode_operation_message"]
