"""The bodies of redrive tasks and the audit log over HTTP: the request of ``replay-all`` (a
filter, a rate, a dry run, a reason) and the shapes ``dlq.tasks.task_json`` and
``dlq.audit.audit_entry_json`` build for the CLI's ``--json`` (the routes answer those dicts)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from graph_ingest.api.dlq_models import REASON
from graph_ingest.api.params import DLQ_ID_PATTERN
from graph_ingest.domain.limits import StoredId
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.redrive_tasks import TaskStatus

MAX_RATE = 10_000.0
"""The fastest rate a task takes (entries/s): beyond it, leave the rate out (no limit)."""
MAX_IDS = 1000


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplayAllRequest(_Shape):
    """Which PENDING_REVIEW entries to replay (every filter given must hold; none: all), how
    fast, and why."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    code: StatusCode | None = Field(None, description="the code of the entry's last failure")
    error_class: StoredId | None = Field(
        None, alias="class", description="the exception class of the entry's last failure"
    )
    space: StoredId | None = Field(None, description="the space of the entry's document")
    dead_lettered_from: AwareDatetime | None = Field(
        None, alias="from", description="dead-lettered at or after this time"
    )
    dead_lettered_to: AwareDatetime | None = Field(
        None, alias="to", description="dead-lettered before this time"
    )
    ids: list[Annotated[str, Field(pattern=DLQ_ID_PATTERN)]] | None = Field(
        None, min_length=1, max_length=MAX_IDS, description="only these DLQ ids"
    )
    rate: float | None = Field(
        None,
        gt=0,
        le=MAX_RATE,
        allow_inf_nan=False,
        description="at most this many entries per second (absent: no limit)",
    )
    dry_run: bool = Field(
        False, description="start no task: count what it would replay and name the first ones"
    )
    reason: str | None = Field(None, **{**REASON, "description": "why: kept in the audit"})

    def selection(self) -> DlqQuery:
        return DlqQuery(
            code=self.code,
            error_class=self.error_class,
            space=self.space,
            dead_lettered_from=self.dead_lettered_from,
            dead_lettered_to=self.dead_lettered_to,
            dlq_ids=None if self.ids is None else tuple(self.ids),
        )


class CancelRequest(_Shape):
    reason: str | None = Field(None, **{**REASON, "description": "why: kept in the audit"})


class RefusalView(_Shape):
    dlq_id: str
    reason: str


class DryRunAnswer(_Shape):
    """What a task with this filter would do now; nothing was changed."""

    dry_run: bool = True
    would_replay: int
    refused: int = Field(description="entries it would not replay (they wait, or are refused)")
    first_ids: list[str] = Field(description="the first DLQ ids it would replay, oldest first")
    refusals: list[RefusalView] = Field(description="the first entries it would not replay, why")


class RedriveTaskView(_Shape):
    """``dlq.tasks.task_json``: a task, its filter and its counts."""

    task_id: str
    status: TaskStatus
    dlq_topic: str
    filter: dict[str, Any]
    rate: float | None
    started_by: str
    reason: str | None
    to_move: int
    moved: int
    refused: int
    failed: int
    refusals: list[RefusalView] = Field(description="the first refusals, with their reasons")
    error: str | None
    started_at: datetime
    heartbeat_at: datetime
    ended_at: datetime | None


class TaskList(_Shape):
    tasks: list[RedriveTaskView] = Field(description="newest first")


class AuditEntryView(_Shape):
    """``dlq.audit.audit_entry_json``: who did what, when, and why."""

    audit_id: int
    at: datetime
    by: str = Field(description="the API token's name, or the CLI's --by")
    action: str
    target: list[str]
    reason: str | None
    details: dict[str, Any]


class AuditList(_Shape):
    entries: list[AuditEntryView] = Field(description="oldest first")


__all__ = [
    "MAX_RATE",
    "AuditEntryView",
    "AuditList",
    "CancelRequest",
    "DryRunAnswer",
    "RedriveTaskView",
    "RefusalView",
    "ReplayAllRequest",
    "TaskList",
]
