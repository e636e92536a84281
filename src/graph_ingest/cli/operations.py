"""`graph-ingest publish-plan` and `graph-ingest status`: put work in, ask where it is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.cli.ops import json_default, status_views
from graph_ingest.cli.params import Duration
from graph_ingest.domain.failure_view import AttemptView, FailureView
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.operation_views import (
    MAX_PARKED_CHAIN,
    OperationView,
    Step,
    SubmissionView,
)
from graph_ingest.store.failures import FailureAttempt
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission

SHOWN_ISSUES = 5
"""`status` (text) lists this many extraction issues, then says how many more there are."""


@click.command("publish-plan")
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@reports_errors
def publish_plan(plan_file: Path) -> None:
    """Validate, fingerprint and publish the plan(s) in PLAN_FILE to the plans topic.

    PLAN_FILE holds one JSON plan or a list of them. A plan without a "fingerprint" is frozen
    now; one with a fingerprint must match it exactly, or nothing is published.

    \b
    Example:
      graph-ingest publish-plan examples/plan.json
    """
    from graph_ingest.producers.plan_publisher import PlanPublisher, load_plan_file

    plans = load_plan_file(plan_file)
    publisher = PlanPublisher(load_settings())
    publisher.start()
    try:
        publisher.publish(plans)
    finally:
        publisher.close()
    for plan in plans:
        click.echo(f"published {plan.operation_id} {plan.key} {plan.fingerprint}")


@click.command("status", cls=JsonCommand)
@click.argument("operation_id", metavar="OP_ID|SUBMISSION_ID")
@click.option(
    "--wait",
    "wait_s",
    type=Duration(),
    is_flag=False,
    flag_value="30s",
    default="0s",
    metavar="[DURATION]",
    help="Wait (30s when no duration is given) until the projection has seen the newest stage "
    "the write side committed; without it the answer may be stale, and says so.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the view as JSON.")
@reports_errors
def status(operation_id: str, wait_s: float, as_json: bool) -> None:
    """Show where an operation is, from the read tables: stage, plan kind, submission, attempts
    (as its DLQ entry counts them), every transition with its own time and the error it
    recorded (error id, trace id), last error, next retry and its tier, DLQ entry, the leaders
    it waits behind, the outages it waited out in place (and how long), fingerprint, document;
    every failure routed to a retry tier or the DLQ (error id, trace id, where, retry advice);
    its replans; and the extraction issues its plan was made with.

    Given the submission id `graph-ingest submit` printed: the submission's whole path through
    replans, each operation in turn, or the planning DLQ entry its request went to.

    Exit code 3 when the id is unknown; 4 when only the write side knows the operation (the
    projector has not folded it: see `graph-ingest projections status`).

    \b
    Examples:
      graph-ingest status op_3f2a… --json
      graph-ingest status sub_91c0… --wait 10s
    """
    from graph_ingest.producers.recovery import OperationNotFound

    settings = load_settings()
    with status_views(settings) as views:
        view = views.operation(operation_id, wait_s=wait_s) or views.submission(
            operation_id, wait_s=wait_s
        )
    if view is None:
        raise OperationNotFound(f"operation {operation_id} not found")
    if as_json:
        click.echo(json.dumps(view_json(view), indent=2, default=json_default))
    else:
        click.echo("\n".join(view_lines(view, settings.planner.max_replans)))


def view_json(view: OperationView | SubmissionView) -> dict[str, object]:
    """The view as JSON: an operation's status fields at the top, with its plan, failures,
    replans and issues; a submission's fields, issues and the path of operations."""
    if isinstance(view, SubmissionView):
        submission = view.submission
        return {
            **{k: v for k, v in asdict(submission).items() if k not in ("issues", "issue_count")},
            **_issues_json(submission),
            "path": [_operation_json(step) for step in view.path],
            "unseen": list(view.unseen),
        }
    return _operation_json(view)


def _operation_json(view: OperationView) -> dict[str, object]:
    return {
        **asdict(view.status),
        "transitions": [{**asdict(s.transition), "error": s.error} for s in view.steps],
        "waits": [asdict(wait) for wait in view.waited],
        "current": view.current,
        "committed_sequence": view.committed_sequence,
        "plan_kind": view.plan_kind,
        "base_operation_id": view.base_operation_id,
        "parked_chain": list(view.parked_chain),
        "failures": [asdict(f) for f in view.failures],
        "replan": asdict(view.replan) if view.replan else None,
        "replan_of": asdict(view.replan_of) if view.replan_of else None,
        "submission_id": view.submission_id,
        **_issues_json(view.submission),
    }


def view_lines(view: OperationView | SubmissionView, max_replans: int) -> list[str]:
    if isinstance(view, OperationView):
        return _operation_lines(view, max_replans)
    submission = view.submission
    lines = [
        f"submission  {submission.submission_id}",
        f"document    {submission.space}/{submission.document_id}",
    ]
    if submission.dlq_id:
        lines.append(
            f"not planned: DLQ entry {submission.dlq_id} "
            f"(graph-ingest dlq show {submission.dlq_id})"
        )
    steps = [f"{step.status.operation_id} {step.status.stage}" for step in view.path]
    steps += [f"{operation_id} not applied yet" for operation_id in view.unseen]
    if steps:
        lines.append(f"path        {' -> '.join(steps)}")
    if not view.path:
        return [*lines, *_describe_issues(submission)]
    for step in view.path:
        lines += ["", *_operation_lines(step, max_replans)]
    return lines


def _operation_lines(view: OperationView, max_replans: int) -> list[str]:
    return [
        *_describe(view),
        *_describe_plan(view),
        *_describe_replans(view.replan, view.replan_of, max_replans),
        *_describe_failures(view.failures),
        *_describe_issues(view.submission),
    ]


def _issues_json(submission: Submission | None) -> dict[str, object]:
    """The extraction issues the submission's plan was made with (none known: an empty list)."""
    issues = submission.issues if submission else ()
    return {
        "issues": [asdict(issue) for issue in issues],
        "issue_count": submission.issue_count if submission else 0,
    }


def _describe_plan(view: OperationView) -> list[str]:
    if view.plan_kind is None:
        return []
    base = view.base_operation_id or "no state (a new document)"
    return [f"plan        {view.plan_kind.value}, planned on {base}"]


def _describe_issues(submission: Submission | None) -> list[str]:
    if submission is None or not submission.issue_count:
        return []
    shown = submission.issues[:SHOWN_ISSUES]
    lines = [f"issues      {submission.issue_count} recorded while extracting"]
    lines += [
        f"  {issue.code} {issue.message}" + (f" (chunk {issue.chunk_id})" if issue.chunk_id else "")
        for issue in shown
    ]
    if submission.issue_count > len(shown):
        lines.append(f"  +{submission.issue_count - len(shown)} more")
    return lines


def _describe_replans(replan: Replan | None, made_by: Replan | None, max_replans: int) -> list[str]:
    """What became of the operation's CONFLICT, and which CONFLICT the operation replans."""
    lines = []
    if made_by is not None:
        lines.append(
            f"replan of   {made_by.operation_id} (replan {made_by.attempt} of at most {max_replans})"
        )
    if replan is None:
        return lines
    attempt = f"replan {replan.attempt} of at most {max_replans}"
    if replan.outcome is ReplanOutcome.REPLANNED:
        lines.append(f"replanned   as {replan.replanned_as} ({attempt})")
    elif replan.outcome is ReplanOutcome.REQUESTED:
        lines.append(f"replanned   requested ({attempt}): not planned yet")
    elif replan.outcome is ReplanOutcome.SUPERSEDED:
        lines.append("replanned   no: a newer request of the document was planned after it")
    else:
        lines.append(
            f"replanned   no: conflicted after {replan.attempt - 1} replan(s), DLQ entry "
            f"{replan.dlq_id} (graph-ingest dlq show {replan.dlq_id})"
        )
    return lines


def _describe_failures(failures: Sequence[FailureAttempt]) -> list[str]:
    lines = []
    for failure in failures:
        view = AttemptView.of_routed(
            failure.detail,
            attempt=failure.attempt,
            tier=failure.tier,
            at=failure.at,
            routed_to=failure.routed_to,
        )
        lines.append(
            f"  attempt {view.attempt:<3} {view.where('main topic'):<10} -> {view.routed_to:<4} "
            f"{view.at.isoformat()}  {view.failure.headline}  (error {view.error_id}, trace "
            f"{view.trace_id}, worker {view.worker_id})"
        )
    return ["failures", *lines] if lines else []


def _describe(view: OperationView) -> list[str]:
    from graph_ingest.dlq.views import format_age

    op = view.status
    lines = [
        f"operation   {op.operation_id}",
        f"document    {op.space}/{op.document_id} (expected revision {op.expected_revision})",
        f"submission  {view.submission_id or '-'}",
        f"stage       {op.stage}",
        f"attempts    {op.attempts}",
        f"fingerprint {op.fingerprint}",
    ]
    if not view.current:
        lines.append(
            f"stale       the projection has seen sequence {op.sequence} of "
            f"{view.committed_sequence}: see `graph-ingest projections status`, or use --wait"
        )
    lines += ["transitions", *(_step_line(step) for step in view.steps)]
    if op.last_error:
        label = "reason" if op.stage in (Stage.CONFLICT, Stage.PARKED) else "last error"
        lines.append(f"{label:<12}{_error_text(op.last_error)}")
    if op.next_retry_at and op.stage is Stage.FAILED:
        tier = "" if op.retry_tier is None else f" on retry tier {op.retry_tier}"
        lines.append(f"next retry  {op.next_retry_at.isoformat()}{tier}")
    if op.dlq_id and op.stage is Stage.DEAD_LETTERED:
        lines.append(f"dlq entry   {op.dlq_id} (graph-ingest dlq show {op.dlq_id})")
    if view.parked_chain:
        more = " -> ..." if len(view.parked_chain) == MAX_PARKED_CHAIN else ""
        lines.append(f"waits for   {' -> '.join(view.parked_chain)}{more}")
    lines += [
        f"waited out  {wait.dependency} outage from {wait.started_at.isoformat()} to "
        f"{wait.ended_at.isoformat()} ({format_age(wait.seconds)}), plan held: no attempt spent"
        for wait in view.waited
    ]
    return lines


def _step_line(step: Step) -> str:
    t = step.transition
    line = f"  {t.sequence:>3} {t.stage:<16}{t.at.isoformat()}  attempts {t.attempts}"
    return line if step.error is None else f"{line}  {_error_text(step.error)}"


def _error_text(error: ErrorInfo) -> str:
    """The error's headline, then the ids to find it by (those it carries)."""
    ids = [f"error {error.error_id}"] if error.error_id else []
    ids += [f"trace {error.trace_id}"] if error.trace_id else []
    headline = FailureView.of_error(error).headline
    return f"{headline} ({', '.join(ids)})" if ids else headline
