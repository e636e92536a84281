"""One plan on its way through the apply steps (``apply``): the message that delivered it, its
plan, and its operation with every snapshot it passed through, so that each step saves the stage
changes it made (and their outbox events) in its own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage


@dataclass
class PlanWork:
    """One plan on its way through the steps, with every snapshot it passed through."""

    message: PlanMessage
    plan: IngestionPlan
    operation: Operation
    changes: list[Operation]

    @property
    def document(self) -> tuple[str, str]:
        return (self.plan.space, self.plan.document_id)

    def move(self, *stages: Stage, at: datetime, reason: ErrorInfo | None = None) -> None:
        """Walk through ``stages``; ``reason`` explains the last one (why CONFLICT or PARKED)."""
        for index, stage in enumerate(stages, start=1):
            explained = reason if index == len(stages) else None
            self.operation = self.operation.transition(stage, at, explained)
            if stage is Stage.PARKED:  # a plan parks behind its base: the operation it waits for
                self.operation = self.operation.model_copy(
                    update={"parked_behind": self.plan.base_operation_id}
                )
            self.changes.append(self.operation)

    def flush_changes(self) -> list[Operation]:
        changes, self.changes = self.changes, []
        return changes


def documents(works: Sequence[PlanWork]) -> list[tuple[str, str]]:
    """The (space, document id) of each plan, in order: what a step locks first."""
    return [w.document for w in works]
