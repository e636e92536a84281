"""The apply algorithm's third step (``apply``): commit the document states of what the graph
step wrote.

In one transaction, under the document locks: the state compare-and-set, history and fact
sources, STATE_COMMITTED and COMPLETED, the conflict of a plan whose document moved on (and of
the plans orphaned by it), and the release of plans parked behind the new revisions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graph_ingest.consumers.applier.ladder import Ladder
from graph_ingest.consumers.applier.parked import conflict_orphans, release_parked
from graph_ingest.consumers.applier.work import PlanWork, documents
from graph_ingest.domain.admission import applies_onto, conflict_reason
from graph_ingest.domain.stages import Stage
from graph_ingest.store.base import UnitOfWork

log = logging.getLogger(__name__)


@dataclass
class Committed:
    """What the commit step made of the plans it was given."""

    completed: list[PlanWork] = field(default_factory=list)
    conflicted: list[PlanWork] = field(default_factory=list)


def commit_states(
    uow: UnitOfWork, admitted: Sequence[PlanWork], now: datetime, ladder: Ladder
) -> Committed:
    """Commit the states of the plans at GRAPH_APPLIED; complete every plan at STATE_COMMITTED
    (those the admission repaired too)."""
    result = Committed()
    to_commit = [w for w in admitted if w.operation.stage is Stage.GRAPH_APPLIED]
    uow.lock_documents(documents(to_commit))
    failed_cas = uow.commit_document_states(
        [
            w.plan.next_state.model_copy(update={"committed_at": now})
            for w in to_commit
            if w.plan.changes_state
        ]
    ) | _moved_under_no_ops(uow, to_commit)
    committed = []
    for work in to_commit:
        if work.document in failed_cas:
            reason = conflict_reason(None, work.plan.expected_revision)
            log.warning("%s conflict: %s", work.message.context(), reason.message)
            work.move(Stage.CONFLICT, at=now, reason=reason)
            result.conflicted.append(work)
        else:
            work.move(Stage.STATE_COMMITTED, at=now)
            committed.append(work)
    for work in admitted:
        if work.operation.stage is Stage.STATE_COMMITTED:
            work.move(Stage.COMPLETED, at=now)
            result.completed.append(work)
    uow.save_operations([op for w in admitted for op in w.flush_changes()])
    conflict_orphans(uow, [w.plan for w in to_commit if w.document in failed_cas], now)
    release_parked(uow, [w.plan for w in committed if w.plan.changes_state], ladder)
    return result


def _moved_under_no_ops(uow: UnitOfWork, to_commit: Sequence[PlanWork]) -> set[tuple[str, str]]:
    """Documents whose NO_OP no longer sits on its base: a NO_OP commits no state (nothing
    to compare and set), so its base is checked here, under the document locks."""
    no_ops = [w for w in to_commit if not w.plan.changes_state]
    if not no_ops:
        return set()
    revisions = uow.document_revisions(documents(no_ops))
    return {w.document for w in no_ops if not applies_onto(w.plan, revisions.get(w.document))}
