"""The redrive task port: one row per `dlq replay-all` run, its counts, and who may run next.

A task's runner (a thread of the process that started it) writes its progress and a heartbeat;
any process may ask it to stop (CANCELLING). The store enforces one running task per DLQ topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from graph_ingest.domain.status import StatusCode
from graph_ingest.store.errors import StoreError


class TaskStatus(StrEnum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"  # asked to stop: the runner ends it after the entry in hand
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"

    @property
    def active(self) -> bool:
        """Whether a runner still owns the task (it holds the DLQ's one running slot)."""
        return self in (TaskStatus.RUNNING, TaskStatus.CANCELLING)


@dataclass(frozen=True, slots=True)
class Refusal:
    dlq_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """What the runner has done so far."""

    moved: int = 0
    refused: int = 0
    failed: int = 0
    refusals: tuple[Refusal, ...] = ()
    """The first refusals (and failures) with their reasons."""


@dataclass(frozen=True, slots=True)
class NewTask:
    task_id: str
    dlq_topic: str
    filter: dict[str, Any]
    """The entry filter as JSON (``graph_ingest.dlq.tasks.filter_json``)."""
    rate: float | None
    started_by: str
    reason: str | None
    to_move: int


@dataclass(frozen=True, slots=True)
class RedriveTask:
    task_id: str
    dlq_topic: str
    status: TaskStatus
    filter: dict[str, Any]
    rate: float | None
    started_by: str
    reason: str | None
    to_move: int
    progress: TaskProgress
    error: str | None
    started_at: datetime
    heartbeat_at: datetime
    ended_at: datetime | None


class TaskAlreadyRunning(StoreError):
    """A task is already running on this DLQ: one at a time."""

    code = StatusCode.FAILED_PRECONDITION


class RedriveTaskStore(Protocol):
    def insert_redrive_task(self, task: NewTask, *, stale_after_s: float) -> RedriveTask:
        """Insert ``task`` RUNNING, first ending FAILED any active task of its DLQ whose
        heartbeat is older than ``stale_after_s`` (its runner died). TaskAlreadyRunning when a
        live one holds the DLQ."""
        ...

    def get_redrive_task(self, task_id: str) -> RedriveTask | None: ...

    def list_redrive_tasks(self, limit: int) -> list[RedriveTask]:
        """The newest ``limit`` tasks, newest first."""
        ...

    def beat_redrive_task(self, task_id: str, progress: TaskProgress) -> TaskStatus | None:
        """Write the runner's progress and heartbeat; the task's status (CANCELLING when asked
        to stop), None if the task is gone or no longer active."""
        ...

    def request_redrive_cancel(self, task_id: str) -> RedriveTask | None:
        """Set an active task CANCELLING (an ended one is left as it is); the task, or None."""
        ...

    def end_redrive_task(
        self, task_id: str, status: TaskStatus, progress: TaskProgress, error: str | None
    ) -> None: ...

    def expire_stale_redrive_tasks(self, stale_after_s: float) -> Sequence[str]:
        """End FAILED every active task whose heartbeat is older than ``stale_after_s``; their
        ids."""
        ...


class RepeatFailures(Protocol):
    def repeat_failures(self, dlq_id: str) -> int:
        """How often DLQ entry ``dlq_id`` failed again after a replay."""
        ...


__all__ = [
    "NewTask",
    "RedriveTask",
    "RedriveTaskStore",
    "Refusal",
    "RepeatFailures",
    "TaskAlreadyRunning",
    "TaskProgress",
    "TaskStatus",
]
