"""What a step does to the plans parked behind others (``apply``): orphans conflict, and plans
waiting for a committed revision are released.

A plan parked on the planned state of a plan that conflicted waits for a state that will never be
committed: it conflicts too, so that the document's newest request is replanned on the committed
state. A commit re-publishes the plans parked behind its new revisions; those that had followed
their predecessor to the DLQ leave it (status REPLAYED). Both run in the caller's transaction,
under its document locks, so a decision to park and a release cannot miss each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from graph_ingest.consumers.applier.ladder import Ladder
from graph_ingest.dlq.entries import with_status
from graph_ingest.domain.admission import orphan_reason
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.schemas.messages import dlq_message
from graph_ingest.schemas.plan_messages import sized_plan_message
from graph_ingest.store.base import UnitOfWork


def conflict_orphans(uow: UnitOfWork, conflicted: Sequence[IngestionPlan], now: datetime) -> None:
    """Plans parked on the planned state of a plan that conflicted (directly, or through
    other parked plans) wait for a state that will never be committed: they conflict too,
    so that the document's newest request is replanned on the committed state."""
    while conflicted := [p for p in conflicted if p.changes_state]:
        dead = {p.operation_id for p in conflicted}
        waiting = uow.parked_behind(
            [(p.space, p.document_id, p.next_state.revision) for p in conflicted]
        )
        orphans = [
            (stored.operation, plan)
            for stored in waiting
            if stored.operation.stage is Stage.PARKED
            and (plan := decode_plan(stored.plan_bytes)).base_operation_id in dead
        ]
        uow.save_operations(
            [op.transition(Stage.CONFLICT, now, orphan_reason(plan)) for op, plan in orphans]
        )
        conflicted = [plan for _, plan in orphans]


def release_parked(uow: UnitOfWork, committed: Sequence[IngestionPlan], ladder: Ladder) -> None:
    """Re-publish plans that were waiting for these revisions; they re-enter the applier.
    Those that had followed their predecessor to the DLQ leave it (status REPLAYED)."""
    waiting = uow.parked_behind(
        [(p.space, p.document_id, p.next_state.revision) for p in committed]
    )
    if not waiting:
        return
    followers = uow.dlq_entries(
        [
            w.operation.dlq_id
            for w in waiting
            if w.operation.stage is Stage.DEAD_LETTERED and w.operation.dlq_id
        ]
    )
    released = [
        with_status(entry, DlqStatus.REPLAYED, f"released: {entry.parked_behind} completed")
        for entry in followers.values()
    ]
    resent = [
        sized_plan_message(
            decode_plan(w.plan_bytes),
            ladder.plans_topic,
            value=w.plan_bytes,
            max_bytes=ladder.max_message_bytes,
            headers={**w.work_headers, kafka_headers.RELEASED: "parked"},
        )
        for w in waiting
    ]
    uow.put_dlq_entries(released)
    uow.put_plan_claims([claim for _, claim in resent if claim is not None])
    uow.enqueue(
        [
            *(dlq_message(ladder.dlq_topic, entry) for entry in released),
            *(message for message, _ in resent),
        ]
    )
