"""Redrive tasks: `dlq replay-all` as a task that runs in the background, can be followed and
cancelled from any process, and is one at a time per DLQ.

A task replays through ``DlqReplayer.replay_all`` (its throttle, its marks, its refusals) in a
thread of the process that started it (the API process, or the CLI). A second thread writes the
runner's progress and a heartbeat to the task's row every ``heartbeat_s`` and reads back whether
someone asked it to stop (CANCELLING, from any process): then the run ends after the entry in
hand, CANCELLED. The database keeps one active task per DLQ topic (a partial unique index). A
runner that died leaves its row RUNNING with a heartbeat that ages: once it is older than
``stale_after_s``, a start, a list or a read ends it FAILED ("its runner stopped"), so a dead
process never blocks the DLQ for longer than that. The entries it replayed are marked REPLAYED,
so a new task goes on where it stopped.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from graph_ingest.dlq.audit import Audit, AuditAction
from graph_ingest.dlq.errors import DlqError
from graph_ingest.dlq.replayer import Action, DlqReplayer, ReplayItem, ReplayReport
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.redrive_tasks import (
    NewTask,
    RedriveTask,
    RedriveTaskStore,
    Refusal,
    TaskProgress,
    TaskStatus,
)

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
STALE_AFTER_S = 30.0
"""A RUNNING task whose heartbeat is this old has lost its runner (30 heartbeats missed)."""
MAX_REFUSALS_KEPT = 100
"""The task row keeps the first refusals with their reasons; the counts count them all."""
DRY_RUN_SAMPLE = 20


class TaskNotFound(DlqError):
    code = StatusCode.NOT_FOUND


def filter_json(selection: DlqQuery) -> dict[str, Any]:
    """The filters of ``selection`` that are set, JSON-able (kept on the task and in the audit).
    A task replays PENDING_REVIEW entries from the oldest: its status and cursor do not count."""
    chosen = replace(selection, status=None, after=None)
    return {name: _json_value(v) for name, v in asdict(chosen).items() if v is not None}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StatusCode):
        return value.value
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class DryRun:
    """What a task with this filter would do now, changing nothing."""

    would_replay: int
    refused: int
    first_ids: tuple[str, ...]
    """The first DLQ ids it would replay, oldest first (at most DRY_RUN_SAMPLE)."""
    report: ReplayReport


class _Progress:
    """The runner's counts, added to by the replaying thread, read by the heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = TaskProgress()

    def add(self, item: ReplayItem) -> None:
        with self._lock:
            now = self._now
            if item.action is Action.REPLAYED:
                self._now = replace(now, moved=now.moved + 1)
                return
            reason = item.reason or (item.error.message if item.error else item.action.value)
            kept = now.refusals
            if len(kept) < MAX_REFUSALS_KEPT:
                kept = (*kept, Refusal(item.entry.dlq_id, f"{item.action.value}: {reason}"))
            if item.action is Action.FAILED:
                self._now = replace(now, failed=now.failed + 1, refusals=kept)
            else:  # refused, or waiting behind a version still in the DLQ
                self._now = replace(now, refused=now.refused + 1, refusals=kept)

    def snapshot(self) -> TaskProgress:
        with self._lock:
            return self._now


class RunningTask:
    """A task running in this process: follow its progress, wait for its report."""

    def __init__(self, task: RedriveTask) -> None:
        self.task = task
        self.progress = _Progress()
        self.stop = threading.Event()
        self.cancel_requested = threading.Event()
        self.report: ReplayReport | None = None
        self.error: BaseException | None = None
        """What ended the run when replay_all itself raised (the task is FAILED)."""
        self._done = threading.Event()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Whether the run has ended (waiting at most ``timeout_s``)."""
        return self._done.wait(timeout_s)

    def mark_done(self) -> None:
        self._done.set()


def final_status(running: RunningTask) -> tuple[TaskStatus, str | None]:
    """How a run that ended is recorded: cancelled if asked to stop, failed on a service failure
    or an error, completed otherwise (refusals are counted, not a failure)."""
    if running.error is not None:
        return TaskStatus.FAILED, f"{type(running.error).__name__}: {running.error}"
    report = running.report
    if report is not None and report.stopped is not None:
        return TaskStatus.FAILED, f"{report.stopped.code}: {report.stopped.message}"
    if running.cancel_requested.is_set() or running.stop.is_set():
        return TaskStatus.CANCELLED, None
    return TaskStatus.COMPLETED, None


class RedriveTasks:
    """Starts, follows and cancels redrive tasks on one DLQ (``dlq_topic``)."""

    def __init__(
        self,
        store: RedriveTaskStore,
        replayer: DlqReplayer,
        audit: Audit,
        *,
        dlq_topic: str,
        heartbeat_s: float = HEARTBEAT_S,
        stale_after_s: float = STALE_AFTER_S,
    ) -> None:
        self._store = store
        self._replayer = replayer
        self._audit = audit
        self._dlq_topic = dlq_topic
        self._heartbeat_s = heartbeat_s
        self._stale_after_s = stale_after_s
        self._running: dict[str, RunningTask] = {}

    def dry_run(self, selection: DlqQuery) -> DryRun:
        """Count what a task would replay and name the first ones; no task, nothing changed."""
        report = self._replayer.replay_all(selection, dry_run=True)
        would = [i.entry.dlq_id for i in report.items if i.action is Action.WOULD_REPLAY]
        return DryRun(
            would_replay=len(would),
            refused=len(report.items) - len(would),
            first_ids=tuple(would[:DRY_RUN_SAMPLE]),
            report=report,
        )

    def start(
        self, selection: DlqQuery, *, rate: float | None, by: str, reason: str | None
    ) -> RunningTask:
        """Start a task in a thread of this process; TaskAlreadyRunning (naming it) while
        another is active on this DLQ."""
        new = NewTask(
            task_id=f"task-{uuid.uuid4().hex[:16]}",
            dlq_topic=self._dlq_topic,
            filter=filter_json(selection),
            rate=rate,
            started_by=by,
            reason=reason,
            to_move=self._replayer.count(selection),
        )
        task = self._store.insert_redrive_task(new, stale_after_s=self._stale_after_s)
        self._audit.record(
            action=AuditAction.REDRIVE_START,
            by=by,
            target=[task.task_id],
            reason=reason,
            details={"filter": new.filter, "rate": rate, "to_move": new.to_move},
        )
        running = RunningTask(task)
        self._running[task.task_id] = running
        threading.Thread(
            target=self._run, args=(running, selection), name=f"redrive-{task.task_id}", daemon=True
        ).start()
        log.info("redrive %s started by %s: %d to move", task.task_id, by, new.to_move)
        return running

    def get(self, task_id: str) -> RedriveTask:
        self._store.expire_stale_redrive_tasks(self._stale_after_s)
        found = self._store.get_redrive_task(task_id)
        if found is None:
            raise TaskNotFound(f"redrive task {task_id} not found")
        return found

    def list(self, limit: int = 50) -> list[RedriveTask]:
        self._store.expire_stale_redrive_tasks(self._stale_after_s)
        return self._store.list_redrive_tasks(limit)

    def cancel(self, task_id: str, *, by: str, reason: str | None = None) -> RedriveTask:
        """Ask task ``task_id`` to stop (CANCELLING; its runner ends it CANCELLED after the entry
        in hand); an ended task is returned as it is."""
        task = self._store.request_redrive_cancel(task_id)
        if task is None:
            raise TaskNotFound(f"redrive task {task_id} not found")
        if task.status is TaskStatus.CANCELLING:
            self._audit.record(
                action=AuditAction.REDRIVE_CANCEL, by=by, target=[task_id], reason=reason
            )
        running = self._running.get(task_id)
        if running is not None:  # ours: stop it now rather than at its next heartbeat
            running.cancel_requested.set()
            running.stop.set()
        return task

    def _run(self, running: RunningTask, query: DlqQuery) -> None:
        beat = threading.Thread(target=self._heartbeat, args=(running,), daemon=True)
        beat.start()
        try:
            running.report = self._replayer.replay_all(
                query, rate=running.task.rate, stop=running.stop, on_item=running.progress.add
            )
        except Exception as exc:  # recorded on the task (FAILED) and handed to whoever follows
            log.exception("redrive %s failed", running.task.task_id)
            running.error = exc
        finally:
            self._end(running)
            running.mark_done()
            beat.join()

    def _heartbeat(self, running: RunningTask) -> None:
        task_id = running.task.task_id
        while not running.wait(self._heartbeat_s):
            try:
                status = self._store.beat_redrive_task(task_id, running.progress.snapshot())
            except GraphIngestError as exc:  # the run itself meets the outage and ends
                log.warning("redrive %s: heartbeat not written: %s", task_id, exc)
                continue
            if status is not TaskStatus.RUNNING:  # CANCELLING, or ended by someone else
                running.cancel_requested.set()
                running.stop.set()

    def _end(self, running: RunningTask) -> None:
        status, error = final_status(running)
        task_id = running.task.task_id
        self._running.pop(task_id, None)
        try:
            self._store.end_redrive_task(task_id, status, running.progress.snapshot(), error)
        except GraphIngestError as exc:  # its heartbeat goes stale: a later read ends it FAILED
            log.error("redrive %s ended %s but could not record it: %s", task_id, status, exc)
            return
        log.info("redrive %s ended %s", task_id, status)


def task_json(task: RedriveTask) -> dict[str, Any]:
    progress = task.progress
    return {
        "task_id": task.task_id,
        "status": task.status.value,
        "dlq_topic": task.dlq_topic,
        "filter": task.filter,
        "rate": task.rate,
        "started_by": task.started_by,
        "reason": task.reason,
        "to_move": task.to_move,
        "moved": progress.moved,
        "refused": progress.refused,
        "failed": progress.failed,
        "refusals": [{"dlq_id": r.dlq_id, "reason": r.reason} for r in progress.refusals],
        "error": task.error,
        "started_at": task.started_at.isoformat(),
        "heartbeat_at": task.heartbeat_at.isoformat(),
        "ended_at": None if task.ended_at is None else task.ended_at.isoformat(),
    }


__all__ = [
    "DryRun",
    "RedriveTasks",
    "RunningTask",
    "TaskNotFound",
    "filter_json",
    "final_status",
    "task_json",
]
