"""Redrive tasks over HTTP (``dlq.tasks.RedriveTasks``): ``replay-all`` as a task that runs on a
thread of the API process, followed and cancelled from anywhere (the CLI's `dlq task show` and
`dlq task cancel` see the same rows), one at a time per DLQ; and the audit log of every change.

``POST /api/v1/dlq/messages/replay-all`` answers a dry run at once (200: the count and the first
ids) and a task with 202, its id and a ``Location`` to follow it; a second task while one runs is
409 naming it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from graph_ingest.api.auth import Caller
from graph_ingest.api.params import Moment, TaskId, aware
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.api.task_models import (
    AuditList,
    CancelRequest,
    DryRunAnswer,
    RedriveTaskView,
    RefusalView,
    ReplayAllRequest,
    TaskList,
)
from graph_ingest.dlq.audit import AuditAction, audit_entry_json
from graph_ingest.dlq.replayer import Action
from graph_ingest.dlq.tasks import DRY_RUN_SAMPLE, DryRun, task_json
from graph_ingest.projections.queries import MAX_LIMIT
from graph_ingest.store.audit import AuditQuery

router = APIRouter(prefix="/api/v1")

Services = Annotated[ApiServices, Depends(services_of)]


def _dry_run_json(dry: DryRun) -> DryRunAnswer:
    refused = [i for i in dry.report.items if i.action is not Action.WOULD_REPLAY]
    return DryRunAnswer(
        would_replay=dry.would_replay,
        refused=dry.refused,
        first_ids=list(dry.first_ids),
        refusals=[
            RefusalView(dlq_id=i.entry.dlq_id, reason=f"{i.action.value}: {i.reason}")
            for i in refused[:DRY_RUN_SAMPLE]
        ],
    )


@router.post(
    "/dlq/messages/replay-all",
    tags=["dlq"],
    status_code=202,
    response_model=RedriveTaskView,
    responses={200: {"model": DryRunAnswer, "description": "the dry run: nothing was changed"}},
)
def replay_all(body: ReplayAllRequest, caller: Caller, services: Services) -> JSONResponse:
    """Replay every PENDING_REVIEW entry the filter selects, oldest first, at most ``rate`` per
    second, as a redrive task (202, ``Location``: the task); ``dry_run``: 200 with what it would
    do. 409, naming it, while another task runs on this DLQ. Refusals are counted on the task
    with their reasons, not failures."""
    if body.dry_run:
        answer = _dry_run_json(services.redrive.dry_run(body.selection()))
        return JSONResponse(answer.model_dump(mode="json"))
    running = services.start_redrive(
        body.selection(), rate=body.rate, by=caller, reason=body.reason
    )
    task = running.task
    return JSONResponse(
        task_json(task),
        status_code=202,
        headers={"Location": router.url_path_for("task", task_id=task.task_id)},
    )


@router.get("/dlq/tasks", tags=["dlq"], response_model=TaskList)
def tasks(
    services: Services,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="the newest this many")] = 50,
) -> JSONResponse:
    """Redrive tasks, newest first, with their counts (a RUNNING task whose runner died is
    shown FAILED once its heartbeat is 30 s old)."""
    return JSONResponse({"tasks": [task_json(t) for t in services.redrive.list(limit)]})


@router.get("/dlq/tasks/{task_id}", tags=["dlq"], response_model=RedriveTaskView, name="task")
def task(task_id: TaskId, services: Services) -> JSONResponse:
    """One task: RUNNING, CANCELLING, COMPLETED, CANCELLED or FAILED; moved, to move, refused
    (and failed) with the first refusals' reasons."""
    return JSONResponse(task_json(services.redrive.get(task_id)))


@router.post("/dlq/tasks/{task_id}/cancel", tags=["dlq"], response_model=RedriveTaskView)
def cancel(
    task_id: TaskId, caller: Caller, services: Services, body: CancelRequest | None = None
) -> JSONResponse:
    """Ask the task to stop (audited): CANCELLING until its runner, wherever it runs, ends it
    CANCELLED after the entry in hand; the entries it did not reach stay PENDING_REVIEW. A task
    that has ended is answered as it is."""
    reason = None if body is None else body.reason
    return JSONResponse(task_json(services.redrive.cancel(task_id, by=caller, reason=reason)))


@router.get("/audit", tags=["audit"], response_model=AuditList)
def audit(
    services: Services,
    since: Annotated[Moment | None, Query(description="at or after this time")] = None,
    action: Annotated[AuditAction | None, Query(description="only this action")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="the newest this many")] = 100,
) -> JSONResponse:
    """The audit log, oldest first: every replay, purge, redrive start and cancel, and forced
    breaker change, with who (the token's name, or the CLI's --by), when, on what and why."""
    query = AuditQuery(since=aware(since, "since"), action=action, limit=limit)
    return JSONResponse({"entries": [audit_entry_json(e) for e in services.audit.entries(query)]})


__all__ = ["router"]
