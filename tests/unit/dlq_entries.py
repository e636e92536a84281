"""DLQ entries of real plans for the DLQ tools' unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from graph_ingest.dlq.entries import entry_of
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.store.dlq_index import DlqEntry
from tests.unit.dlq_envelopes import envelope
from tests.unit.plans import operation_of as plan_operation

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def entry_for(plan: IngestionPlan | None, number: int = 1, **overrides: Any) -> DlqEntry:
    """The entry of ``plan`` dead-lettered (None: of a message that is no plan)."""
    fields: dict[str, Any] = {
        "original_key": plan.key.encode() if plan else b"junk",
        "original_value": encode_plan(plan) if plan else b"\x00junk",
        "operation_id": plan.operation_id if plan else None,
        "fingerprint": plan.fingerprint if plan else None,
        "dead_lettered_at": T0 + timedelta(minutes=number),
    }
    return entry_of(f"dlq-{number:02d}", envelope(**{**fields, **overrides}))


def operation_of(plan: IngestionPlan, stage: Stage = Stage.DEAD_LETTERED) -> Operation:
    return plan_operation(plan, stage)


def committed(plan: IngestionPlan, revision: int, operation_id: str = "op-other") -> DocumentState:
    """The document of ``plan`` committed at ``revision`` by ``operation_id``."""
    return plan.next_state.model_copy(update={"revision": revision, "operation_id": operation_id})
