"""The fold of operation snapshots into one document's view, as a pure decision (the model is
``projections.fold``): every operation of the document with its newest snapshot, and what the
last COMPLETED operation that changes state made the document.

=======================================  ==========  ======================================
the snapshot                             verdict     the view afterwards
=======================================  ==========  ======================================
of an operation the view lacks           ADVANCE     the operation added
newer than the operation's in the view   ADVANCE     the operation's entry replaced
as old or older                          DUPLICATE   unchanged
=======================================  ==========  ======================================

The revision is derived from the set of operations, never carried along: a plan that changes
state moves the document from ``expected_revision`` to ``expected_revision + 1`` (``domain.plan``);
the COMPLETED one with the highest expected revision made the current state (and its version).
A NO_OP changes nothing, so it never names the current state. Folding any permutation of a set
of snapshots, duplicates included, gives one view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.fold import FoldVerdict


@dataclass(frozen=True, slots=True)
class DocumentOperation:
    """One operation of a document, as its newest snapshot says."""

    operation_id: str
    expected_revision: int
    stage: Stage
    sequence: int
    plan_kind: PlanKind | None
    """None while the operation event does not say (operation v1): taken as changing state."""
    document_version: str | None
    """The version its plan makes; None while the operation event does not say (v1)."""
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, operation: Operation) -> DocumentOperation:
        return cls(
            operation_id=operation.operation_id,
            expected_revision=operation.expected_revision,
            stage=operation.stage,
            sequence=operation.sequence,
            plan_kind=operation.plan_kind,  # None from an operation event v1
            document_version=operation.document_version,
            created_at=operation.created_at,
            updated_at=operation.updated_at,
        )

    @property
    def made_state(self) -> bool:
        """Whether the operation committed a new state of its document."""
        return self.stage is Stage.COMPLETED and self.plan_kind is not PlanKind.NO_OP


@dataclass(frozen=True, slots=True)
class DocumentView:
    """A document: what its last completed state-changing operation made it (revision 0, no
    version and no operation while none has completed), and its operations, oldest first."""

    space: str
    document_id: str
    revision: int
    document_version: str | None
    """The version the operation that made the revision made (None when its event does not say)."""
    operation_id: str | None
    completed_at: datetime | None
    operations: tuple[DocumentOperation, ...]
    updated_at: datetime
    """When the newest snapshot of any of its operations was taken."""

    @classmethod
    def of(
        cls, space: str, document_id: str, operations: tuple[DocumentOperation, ...]
    ) -> DocumentView:
        ordered = tuple(sorted(operations, key=lambda o: (o.created_at, o.operation_id)))
        made = [o for o in ordered if o.made_state]
        current = max(made, key=lambda o: o.expected_revision, default=None)
        return cls(
            space=space,
            document_id=document_id,
            revision=current.expected_revision + 1 if current else 0,
            document_version=current.document_version if current else None,
            operation_id=current.operation_id if current else None,
            completed_at=current.updated_at if current else None,
            operations=ordered,
            updated_at=max(o.updated_at for o in ordered),
        )


def fold_document(
    stored: DocumentView | None, event: Operation
) -> tuple[FoldVerdict, DocumentView]:
    """The view after ``event`` (of an operation of ``stored``'s document, or of a new one)."""
    step = DocumentOperation.of(event)
    if stored is None:
        return FoldVerdict.ADVANCE, DocumentView.of(event.space, event.document_id, (step,))
    seen = next((o for o in stored.operations if o.operation_id == step.operation_id), None)
    if seen is not None and seen.sequence >= step.sequence:
        return FoldVerdict.DUPLICATE, stored
    others = tuple(o for o in stored.operations if o.operation_id != step.operation_id)
    return FoldVerdict.ADVANCE, DocumentView.of(stored.space, stored.document_id, (*others, step))


__all__ = ["DocumentOperation", "DocumentView", "fold_document"]
