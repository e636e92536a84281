"""The redrive task port on PostgreSQL: ``redrive_tasks`` rows; a partial unique index keeps one
active task per DLQ topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from graph_ingest.store.postgres.params import Row
from graph_ingest.store.postgres.session import PooledReads
from graph_ingest.store.postgres.translate import translated
from graph_ingest.store.redrive_tasks import (
    NewTask,
    RedriveTask,
    Refusal,
    TaskAlreadyRunning,
    TaskProgress,
    TaskStatus,
)

TASK_COLUMNS = """task_id, dlq_topic, status, filter, rate, started_by, reason, to_move, moved,
    refused, failed, refusals, error, started_at, heartbeat_at, ended_at"""

ACTIVE = "status IN ('RUNNING', 'CANCELLING')"

EXPIRE_STALE = f"""
UPDATE redrive_tasks
SET status = 'FAILED', ended_at = clock_timestamp(),
    error = format('its runner stopped (no heartbeat since %%s): ended by a later start or read',
                   heartbeat_at)
WHERE {ACTIVE}
  AND heartbeat_at < clock_timestamp() - make_interval(secs => %(stale_after_s)s::float8)
  AND (%(dlq_topic)s::text IS NULL OR dlq_topic = %(dlq_topic)s::text)
RETURNING task_id
"""

INSERT_TASK = f"""
INSERT INTO redrive_tasks (task_id, dlq_topic, status, filter, rate, started_by, reason, to_move)
VALUES (%(task_id)s, %(dlq_topic)s, 'RUNNING', %(filter)s, %(rate)s, %(started_by)s, %(reason)s,
        %(to_move)s)
RETURNING {TASK_COLUMNS}
"""

ACTIVE_TASK = f"SELECT {TASK_COLUMNS} FROM redrive_tasks WHERE dlq_topic = %s AND {ACTIVE}"

GET_TASK = f"SELECT {TASK_COLUMNS} FROM redrive_tasks WHERE task_id = %s"

LIST_TASKS = f"SELECT {TASK_COLUMNS} FROM redrive_tasks ORDER BY started_at DESC LIMIT %s"

_PROGRESS = """moved = %(moved)s, refused = %(refused)s, failed = %(failed)s,
    refusals = %(refusals)s"""

BEAT_TASK = f"""
UPDATE redrive_tasks SET {_PROGRESS}, heartbeat_at = clock_timestamp()
WHERE task_id = %(task_id)s AND {ACTIVE}
RETURNING status
"""

REQUEST_CANCEL = f"""
UPDATE redrive_tasks
SET status = CASE WHEN {ACTIVE} THEN 'CANCELLING' ELSE status END
WHERE task_id = %s
RETURNING {TASK_COLUMNS}
"""

END_TASK = f"""
UPDATE redrive_tasks
SET {_PROGRESS}, status = %(status)s, error = %(error)s, ended_at = clock_timestamp(),
    heartbeat_at = clock_timestamp()
WHERE task_id = %(task_id)s
RETURNING task_id
"""

REPEAT_FAILURES = "SELECT repeat_failures FROM dlq_repeat_failures WHERE dlq_id = %s"


class PostgresRedriveTasks(PooledReads):
    """``RedriveTaskStore``: each call its own short transaction."""

    @translated
    def insert_redrive_task(self, task: NewTask, *, stale_after_s: float) -> RedriveTask:
        params = {
            "task_id": task.task_id,
            "dlq_topic": task.dlq_topic,
            "filter": Jsonb(task.filter),
            "rate": task.rate,
            "started_by": task.started_by,
            "reason": task.reason,
            "to_move": task.to_move,
            "stale_after_s": stale_after_s,
        }
        try:
            with (
                self._require_pool().connection() as conn,
                conn.cursor(row_factory=dict_row) as cur,
            ):
                cur.execute(EXPIRE_STALE, params)
                cur.execute(INSERT_TASK, params)
                row = cur.fetchone()
        except pg_errors.UniqueViolation as exc:
            running = self._fetch_one(ACTIVE_TASK, (task.dlq_topic,))
            name = "another task" if running is None else _describe(task_from_row(running))
            raise TaskAlreadyRunning(
                f"{name} is running on {task.dlq_topic}: one redrive at a time; follow it with "
                "`graph-ingest dlq task show ID` or stop it with `graph-ingest dlq task cancel ID`"
            ) from exc
        assert row is not None  # INSERT ... RETURNING returns the row
        return task_from_row(row)

    @translated
    def get_redrive_task(self, task_id: str) -> RedriveTask | None:
        row = self._fetch_one(GET_TASK, (task_id,))
        return None if row is None else task_from_row(row)

    @translated
    def list_redrive_tasks(self, limit: int) -> list[RedriveTask]:
        return [task_from_row(row) for row in self._fetch_all(LIST_TASKS, (limit,))]

    @translated
    def beat_redrive_task(self, task_id: str, progress: TaskProgress) -> TaskStatus | None:
        row = self._fetch_one(BEAT_TASK, _progress_params(task_id, progress))
        return None if row is None else TaskStatus(row["status"])

    @translated
    def request_redrive_cancel(self, task_id: str) -> RedriveTask | None:
        row = self._fetch_one(REQUEST_CANCEL, (task_id,))
        return None if row is None else task_from_row(row)

    @translated
    def end_redrive_task(
        self, task_id: str, status: TaskStatus, progress: TaskProgress, error: str | None
    ) -> None:
        params = {**_progress_params(task_id, progress), "status": status.value, "error": error}
        self._fetch_all(END_TASK, params)

    @translated
    def expire_stale_redrive_tasks(self, stale_after_s: float) -> Sequence[str]:
        found = self._fetch_all(EXPIRE_STALE, {"stale_after_s": stale_after_s, "dlq_topic": None})
        return [row["task_id"] for row in found]


class PostgresRepeatFailures(PooledReads):
    """``RepeatFailures``: counted by a trigger on ``dlq_entries`` (migration 0012)."""

    @translated
    def repeat_failures(self, dlq_id: str) -> int:
        row = self._fetch_one(REPEAT_FAILURES, (dlq_id,))
        return 0 if row is None else int(row["repeat_failures"])


def _describe(task: RedriveTask) -> str:
    return f"task {task.task_id} ({task.status}, started by {task.started_by} at {task.started_at})"


def _progress_params(task_id: str, progress: TaskProgress) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "moved": progress.moved,
        "refused": progress.refused,
        "failed": progress.failed,
        "refusals": Jsonb([{"dlq_id": r.dlq_id, "reason": r.reason} for r in progress.refusals]),
    }


def task_from_row(row: Row) -> RedriveTask:
    return RedriveTask(
        task_id=row["task_id"],
        dlq_topic=row["dlq_topic"],
        status=TaskStatus(row["status"]),
        filter=dict(row["filter"]),
        rate=row["rate"],
        started_by=row["started_by"],
        reason=row["reason"],
        to_move=row["to_move"],
        progress=TaskProgress(
            moved=row["moved"],
            refused=row["refused"],
            failed=row["failed"],
            refusals=tuple(Refusal(r["dlq_id"], r["reason"]) for r in row["refusals"]),
        ),
        error=row["error"],
        started_at=row["started_at"],
        heartbeat_at=row["heartbeat_at"],
        ended_at=row["ended_at"],
    )


__all__ = ["PostgresRedriveTasks", "PostgresRepeatFailures", "task_from_row"]
