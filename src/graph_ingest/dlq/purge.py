"""`dlq purge`: resolve an entry for good, and never strand the versions that wait behind it.

A dead-lettered operation can be a *leader*: later versions of its document wait behind it,
PARKED or dead-lettered after it ("parked behind"), for a revision only its commit makes. Once
its entry is RESOLVED it never commits, and they would wait forever with nothing pointing at them.
So a purge that would strand followers is refused, naming them; ``force`` purges it and moves
every follower to CONFLICT (its own entry, if it has one, RESOLVED with the reason), all in one
transaction: the planner worker then replans the newest submission of the document on its
committed state (``consumers.planner.conflicts``). A version that arrives later and would park behind
the purged operation is a CONFLICT at admission for the same reason (``leader_purged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from graph_ingest.dlq.entries import with_status
from graph_ingest.dlq.errors import DlqEntryNotFound, DlqRefused
from graph_ingest.dlq.status import MAX_NOTE_LENGTH
from graph_ingest.domain.admission import path_to
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.limits import bounded_text
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import dlq_message
from graph_ingest.store.base import OperationStore, UnitOfWork
from graph_ingest.store.dlq_index import DlqEntry


def leader_purged(leader: Operation) -> ErrorInfo:
    """Why a version waiting behind ``leader``, whose DLQ entry was purged, is a CONFLICT."""
    return ErrorInfo(
        code=StatusCode.FAILED_PRECONDITION,
        error_class="LeaderPurged",
        message=f"leader {leader.operation_id} purged (DLQ entry {leader.dlq_id}): the revision "
        f"{leader.expected_revision + 1} this plan builds on never commits; replan on the "
        "committed state",
    )


@dataclass(frozen=True, slots=True)
class Purged:
    entry: DlqEntry
    """The entry, RESOLVED."""
    followers: tuple[Operation, ...] = ()
    """The versions that waited behind its operation, now CONFLICT."""


def purge(
    store: OperationStore, dlq_topic: str, dlq_id: str, reason: str, *, force: bool = False
) -> Purged:
    """Resolve the entry with ``reason`` as its note: it stays in the index and on the topic, for
    audit, and is never replayed. Refused for an entry RESOLVED already, and (unless ``force``)
    for one whose operation later versions wait behind."""
    note = bounded_text(reason.strip(), MAX_NOTE_LENGTH)
    if not note:
        raise DlqRefused("a purge needs a reason (--reason TEXT): it is kept for audit")
    listed = store.get_dlq_entry(dlq_id)
    if listed is None:
        raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
    now = datetime.now(UTC)
    with store.unit_of_work() as uow:
        leader, followers = _leader_and_followers(uow, listed)
        op_id = listed.operation_id
        entry = uow.dlq_entries([dlq_id]).get(dlq_id)
        if entry is None:
            raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
        if entry.status is DlqStatus.RESOLVED:
            raise DlqRefused(f"entry {dlq_id} is RESOLVED already")
        changes: list[Operation] = []
        if leader is not None and followers:
            if not force:
                raise DlqRefused(_strands(entry, leader, followers))
            changes = _to_conflict(leader, followers, now)
        uow.save_operations(changes)
        follower_entries = uow.dlq_entries([f.dlq_id for f in followers if f.dlq_id]).values()
        resolved = [
            with_status(entry, DlqStatus.RESOLVED, note),
            *(
                with_status(e, DlqStatus.RESOLVED, f"leader {op_id} purged: moved to CONFLICT")
                for e in follower_entries
                if e.status is DlqStatus.PENDING_REVIEW
            ),
        ]
        uow.put_dlq_entries(resolved)
        uow.enqueue([dlq_message(dlq_topic, e) for e in resolved])
    return Purged(resolved[0], tuple(c for c in changes if c.stage is Stage.CONFLICT))


def _leader_and_followers(
    uow: UnitOfWork, listed: DlqEntry
) -> tuple[Operation | None, list[Operation]]:
    """The entry's operation (locked, after its document) and, while it is DEAD_LETTERED, the
    later versions that wait behind it (what a purge strands)."""
    if listed.space is not None and listed.document_id is not None:
        uow.lock_documents([(listed.space, listed.document_id)])
    op_id = listed.operation_id
    leader = uow.lock_operations([op_id]).get(op_id) if op_id else None
    if leader is None or leader.stage is not Stage.DEAD_LETTERED:
        return leader, []
    return leader, uow.waiting_behind(leader)


def stranded_by(store: OperationStore, dlq_id: str) -> tuple[Operation, ...]:
    """What a purge of the entry would strand now (the versions waiting behind its operation),
    read as ``purge`` reads it and changing nothing: for a confirmation shown before it."""
    listed = store.get_dlq_entry(dlq_id)
    if listed is None:
        raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
    with store.unit_of_work() as uow:
        return tuple(_leader_and_followers(uow, listed)[1])


def _to_conflict(leader: Operation, followers: list[Operation], now: datetime) -> list[Operation]:
    """Every snapshot that takes ``followers`` to CONFLICT (a dead-lettered one by way of
    PREPARED, the one legal path)."""
    changes = []
    for follower in followers:
        snapshot = follower
        for stage in path_to(follower.stage, Stage.CONFLICT):
            why = leader_purged(leader) if stage is Stage.CONFLICT else None
            snapshot = snapshot.transition(stage, now, why)
            changes.append(snapshot)
    return changes


def _strands(entry: DlqEntry, leader: Operation, followers: list[Operation]) -> str:
    waiting = ", ".join(
        f"{f.operation_id} ({f.stage}, expects revision {f.expected_revision}"
        + (f", DLQ entry {f.dlq_id})" if f.stage is Stage.DEAD_LETTERED else ")")
        for f in followers
    )
    return (
        f"entry {entry.dlq_id}: {len(followers)} later version(s) of {leader.space}/"
        f"{leader.document_id} wait behind operation {leader.operation_id}: {waiting}. Purged, "
        "it would strand them (the revision they build on never commits). Replay it instead, "
        "or pass --force to purge it and move them to CONFLICT (the planner replans the "
        "document's newest submission on its committed state)"
    )


__all__ = ["Purged", "leader_purged", "purge", "stranded_by"]
