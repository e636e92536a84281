"""`graph-ingest dlq tasks | task show | task cancel`, and following a redrive task in this
process (`dlq replay-all`) with a progress bar."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.dlq_common import actor_options, echo_json, redrive_tasks
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.dlq.replayer import ReplayReport
    from graph_ingest.dlq.tasks import RedriveTasks, RunningTask
    from graph_ingest.store.redrive_tasks import RedriveTask, TaskProgress

POLL_S = 0.2
INTERRUPTED = "interrupted (SIGINT/SIGTERM) while following it"


def _done(progress: TaskProgress) -> int:
    return progress.moved + progress.refused + progress.failed


def _counts(progress: TaskProgress) -> str:
    return f"{progress.moved} moved, {progress.refused} refused, {progress.failed} failed"


def follow_task(
    redrive: RedriveTasks,
    running: RunningTask,
    stop: threading.Event,
    *,
    by: str,
    plain: bool,
) -> ReplayReport:
    """Follow ``running`` until it ends: a rich progress bar on a terminal, else (or ``plain``)
    a line on stderr whenever the counts change. ``stop`` (a signal) cancels the task. Raises
    what ended the run when it failed with an error."""
    task_id = running.task.task_id
    click.echo(f"redrive task {task_id}: {running.task.to_move} to move", err=True)
    if plain or not sys.stderr.isatty():
        _follow(redrive, running, stop, by, on_progress=_plain_lines(task_id))
    else:
        from rich.console import Console
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=False) as bar:
            line = bar.add_task(f"replaying ({task_id})", total=running.task.to_move or None)
            _follow(
                redrive,
                running,
                stop,
                by,
                on_progress=lambda p: bar.update(line, completed=_done(p)),
            )
    if running.error is not None:
        raise running.error
    assert running.report is not None  # a run that ended without an error has its report
    return running.report


def _plain_lines(task_id: str) -> Callable[[TaskProgress], None]:
    last: list[TaskProgress] = []

    def show(progress: TaskProgress) -> None:
        if not last or last[0] != progress:
            click.echo(f"redrive task {task_id}: {_counts(progress)}", err=True)
            last[:] = [progress]

    return show


def _follow(
    redrive: RedriveTasks,
    running: RunningTask,
    stop: threading.Event,
    by: str,
    *,
    on_progress: Callable[[TaskProgress], None],
) -> None:
    cancelled = False
    while not running.wait(POLL_S):
        on_progress(running.progress.snapshot())
        if stop.is_set() and not cancelled:
            redrive.cancel(running.task.task_id, by=by, reason=INTERRUPTED)
            cancelled = True
    on_progress(running.progress.snapshot())


def task_lines(task: RedriveTask) -> list[str]:
    progress = task.progress
    lines = [
        f"task        {task.task_id}  {task.status}",
        f"started     {task.started_at.isoformat()} by {task.started_by}"
        + (f": {task.reason}" if task.reason else ""),
        f"filter      {task.filter or 'every PENDING_REVIEW entry'}"
        + (f" at most {task.rate:g}/s" if task.rate else ""),
        f"progress    {_counts(progress)} of {task.to_move} to move",
        f"heartbeat   {task.heartbeat_at.isoformat()}",
    ]
    if task.ended_at is not None:
        lines.append(f"ended       {task.ended_at.isoformat()}")
    if task.error:
        lines.append(f"error       {task.error}")
    lines += [f"  {r.dlq_id}  {r.reason}" for r in progress.refusals]
    return lines


@click.command("tasks", cls=JsonCommand)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the tasks as JSON.")
@reports_errors
def tasks(limit: int, as_json: bool) -> None:
    """List redrive tasks (`dlq replay-all` runs), newest first, with their counts.

    A RUNNING task whose runner died (no heartbeat for 30 s) is shown FAILED.

    \b
    Example:
      graph-ingest dlq tasks --json | jq '.tasks[] | select(.status == "RUNNING")'
    """
    from graph_ingest.dlq.tasks import task_json

    with redrive_tasks(load_settings()) as redrive:
        found = redrive.list(limit)
    if as_json:
        echo_json({"tasks": [task_json(t) for t in found]})
        return
    if not found:
        click.echo("no redrive tasks")
    for t in found:
        click.echo(
            f"{t.task_id}  {t.status:<10}  {_counts(t.progress)} of {t.to_move}  "
            f"{t.started_at.isoformat()}  {t.started_by}"
        )


@click.group("task")
def task() -> None:
    """One redrive task: show it, or cancel it (from any process)."""


@task.command("show", cls=JsonCommand)
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@reports_errors
def show_task(task_id: str, as_json: bool) -> None:
    """Show redrive task TASK_ID: status, filter, counts, refusals with reasons. Exit code 3 for
    an unknown id.

    \b
    Example:
      graph-ingest dlq task show task-5c1e… --json | jq '.moved'
    """
    from graph_ingest.dlq.tasks import task_json

    with redrive_tasks(load_settings()) as redrive:
        found = redrive.get(task_id)
    if as_json:
        echo_json(task_json(found))
        return
    for line in task_lines(found):
        click.echo(line)


@task.command("cancel", cls=JsonCommand)
@click.argument("task_id")
@actor_options
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@reports_errors
def cancel_task(task_id: str, by: str, reason: str | None, as_json: bool) -> None:
    """Cancel redrive task TASK_ID: it is CANCELLING until its runner (wherever it runs) stops
    after the entry in hand, then CANCELLED; the entries it did not reach stay PENDING_REVIEW.
    A task that has ended is left as it is. The cancel is recorded in the audit log.

    \b
    Example:
      graph-ingest dlq task cancel task-5c1e… --reason "wrong filter"
    """
    from graph_ingest.dlq.audit import local_actor
    from graph_ingest.dlq.tasks import task_json

    with redrive_tasks(load_settings()) as redrive:
        found = redrive.cancel(task_id, by=by or local_actor(), reason=reason)
    if as_json:
        echo_json(task_json(found))
        return
    click.echo(f"{found.task_id}  {found.status}")
