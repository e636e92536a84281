"""The DLQ API's bodies: the shapes ``dlq.views`` builds for the CLI's ``--json`` (the routes
answer those very dicts), declared as models so ``/openapi.json`` is exact and schemathesis
checks every answer against it; and the requests of replay and purge."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graph_ingest.dlq.replay import PlanSource
from graph_ingest.dlq.replayer import Action
from graph_ingest.domain.dlq import DlqEnvelope, DlqStatus
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.request import RequestKind
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestView(_Shape):
    """``dlq.request_views.RequestSummary``: what a planning entry's request asked."""

    submission_id: str | None
    space: str | None
    document_id: str | None
    kind: RequestKind | None
    document_version: str | None
    decodes: bool
    error: str | None = None


class DlqEntryView(_Shape):
    """``dlq.views.entry_json``: one row of the DLQ index."""

    dlq_id: str
    status: DlqStatus
    code: StatusCode
    error_class: str
    message: str
    operation_id: str | None
    fingerprint: str | None
    space: str | None
    document_id: str | None
    parked_behind: str | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    attempts: int
    dead_lettered_at: datetime
    age_s: float
    request: RequestView | None = Field(
        description="a request that failed planning (no plan, no operation): what it asked; "
        "null for a plan's entry"
    )


class DlqEntryPage(_Shape):
    entries: list[DlqEntryView]
    next_cursor: str | None = Field(
        description="pass it back as `cursor` for the next page; null on the last page"
    )


class PlanView(_Shape):
    """``dlq.views.show_json``'s plan: its summary when the dead-lettered value decodes as a
    plan, else why not."""

    decodes: bool
    error: str | None = None
    operation_id: str | None = None
    space: str | None = None
    document_id: str | None = None
    expected_revision: int | None = None
    kind: str | None = None
    fingerprint: str | None = None
    node_upserts: int | None = None
    edge_upserts: int | None = None
    node_deletes: int | None = None
    edge_deletes: int | None = None


class DlqEntryDetail(DlqEntryView):
    """``dlq.views.show_json``: the entry, its plan and its whole envelope (raw key, value and
    header values in base64, the attempt history)."""

    note: str | None
    operation_stage: Stage | None
    plan: PlanView | None = Field(description="null for a request's entry (see `request`)")
    envelope: DlqEnvelope


class CodeAndStatus(_Shape):
    code: StatusCode
    status: DlqStatus
    entries: int


class DlqStatsView(_Shape):
    """``dlq.views.stats_json``."""

    total: int
    by_status: dict[DlqStatus, int]
    by_code: dict[StatusCode, int]
    by_code_and_status: list[CodeAndStatus]
    oldest_pending_age_s: float | None


class ReplayItemView(_Shape):
    """``dlq.views.replay_item_json``: what a replay did."""

    dlq_id: str
    action: Action
    status: DlqStatus
    operation_id: str | None
    space: str | None
    document_id: str | None
    code: StatusCode
    source: PlanSource | None
    reason: str | None
    error: ErrorInfo | None


REASON: dict[str, Any] = {
    "min_length": 1,
    "max_length": 1000,
    "pattern": r"^[^\x00]*\S[^\x00]*$",
    "description": "why: kept with the entry (and in the audit)",
}
"""The constraints of a change's reason, in a body or a query."""


class Reason(BaseModel):
    reason: str = Field(**REASON)


class ReplayRequest(Reason):
    force: bool = Field(
        default=False, description="replay an entry that is no longer PENDING_REVIEW"
    )


class Conflicted(_Shape):
    operation_id: str
    expected_revision: int


class PurgeAnswer(DlqEntryView):
    """``dlq.views.purge_json``: the entry, RESOLVED, and the versions moved to CONFLICT."""

    note: str
    conflicted: list[Conflicted] = Field(
        description="operations that waited behind it, moved to CONFLICT (only with force=true)"
    )


__all__ = [
    "REASON",
    "DlqEntryDetail",
    "DlqEntryPage",
    "DlqEntryView",
    "DlqStatsView",
    "PlanView",
    "PurgeAnswer",
    "Reason",
    "ReplayItemView",
    "ReplayRequest",
]
