"""The console's redrive tasks: the list with each task's progress (live), "replay all
matching" from the DLQ list's filters through a confirmation that shows the dry run (how many,
the first ids, what would be refused) and asks for a rate and a reason, and cancel on a running
task. Tasks run in the API's process (``ApiServices.redrive``, the ``RedriveTasks`` the CLI's
``dlq replay-all`` uses); the token is the cookie's, as for a replay."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from graph_ingest.api.console.pages import failure_page, render
from graph_ingest.api.console.tokens import form_fields, require_cookie_token
from graph_ingest.api.console.views import dlq_query
from graph_ingest.api.errors import ApiError, http_status_of
from graph_ingest.api.services import services_of
from graph_ingest.dlq.errors import DlqRefused
from graph_ingest.dlq.replayer import Action
from graph_ingest.dlq.tasks import filter_json
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.projections.queries import InvalidQuery
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.redrive_tasks import TaskAlreadyRunning

router = APIRouter(include_in_schema=False)

LIVE_S = 2
"""A task moves entries every second or so: its bar is refreshed about as often."""
DEFAULT_RATE = 5.0
FILTER_FIELDS = ("code", "space", "document")
"""The DLQ list's filters a task takes (its status aside: a task replays PENDING_REVIEW)."""


def task_selection(params: Mapping[str, str]) -> DlqQuery:
    """Every PENDING_REVIEW entry the DLQ list's filters select, not one page of them (nor
    from the page the list was at)."""
    return replace(dlq_query(params), status=None, limit=None, after=None)


def _rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = 0.0
    if not rate > 0 or rate == float("inf"):
        raise InvalidQuery(f"the rate is entries per second, a positive number, not {text!r}")
    return rate


@router.get("/ui/dlq/tasks", name="console_tasks")
def tasks(request: Request) -> HTMLResponse:
    return _tasks_page(request)


def _tasks_page(
    request: Request, *, problem: str | None = None, status_code: int = 200
) -> HTMLResponse:
    try:
        listed = services_of(request).redrive.list()
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    return render(request, "tasks.html", title="Redrive tasks", section="dlq", live=LIVE_S,
                  tasks=listed, problem=problem, status_code=status_code)  # fmt: skip


@router.get("/ui/dlq/tasks/new", name="console_task_confirm")
def confirm(request: Request) -> HTMLResponse:
    """What "replay all matching" would do now (the dry run), and the form that starts it."""
    return _confirmation(request, request.query_params)


def _confirmation(
    request: Request,
    params: Mapping[str, str],
    *,
    problem: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    shown: dict[str, Any] = {"title": "Replay all matching?", "section": "dlq"}
    try:
        selection = task_selection(params)
        dry = services_of(request).redrive.dry_run(selection)
    except InvalidQuery as exc:
        return render(request, "error.html", **shown, problem=exc.message, status_code=400)
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    return render(
        request,
        "task_confirm.html",
        **shown,
        status_code=status_code,
        problem=problem,
        dry=dry,
        refusals=[i for i in dry.report.items if i.action is not Action.WOULD_REPLAY],
        chosen=filter_json(selection),
        fields={name: params.get(name, "") for name in FILTER_FIELDS},
        rate=params.get("rate") or f"{DEFAULT_RATE:g}",
        back=f"{request.app.url_path_for('console_dlq')}?{urlencode(_filters(params))}",
    )


def _filters(params: Mapping[str, str]) -> dict[str, str]:
    return {name: params[name] for name in FILTER_FIELDS if params.get(name)}


@router.post("/ui/dlq/tasks/new", name="console_task_start")
async def start(request: Request) -> Response:
    """Start the task as the token's owner; to the task list, or back saying why not."""
    fields = await form_fields(request)
    reason = fields.get("reason", "").strip()
    try:
        who = require_cookie_token(request)
        if not reason:
            raise DlqRefused("a replay of all matching entries needs a reason: it is audited")
        running = services_of(request).start_redrive(
            task_selection(fields), rate=_rate(fields.get("rate", "")), by=who, reason=reason
        )
    except (ApiError, DlqRefused, InvalidQuery, TaskAlreadyRunning) as exc:
        return _confirmation(
            request, fields, problem=exc.message, status_code=http_status_of(exc.code)
        )
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    task = running.task
    notice = f"task {task.task_id} started by {who}: {task.to_move} to move"
    return _to_tasks(request, notice)


@router.post("/ui/dlq/tasks/{task_id}/cancel", name="console_task_cancel")
def cancel(request: Request, task_id: str) -> Response:
    """Ask the task to stop after the entry in hand (from any process that runs it)."""
    try:
        who = require_cookie_token(request)
        task = services_of(request).redrive.cancel(
            task_id, by=who, reason="cancelled in the console"
        )
    except ApiError as exc:  # no token: the list again, saying so
        return _tasks_page(request, problem=exc.message, status_code=http_status_of(exc.code))
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    return _to_tasks(request, f"task {task_id} is {task.status} (asked by {who})")


def _to_tasks(request: Request, notice: str) -> Response:
    target = request.app.url_path_for("console_tasks")
    return RedirectResponse(f"{target}?{urlencode({'notice': notice})}", status_code=303)


__all__ = ["router", "task_selection"]
