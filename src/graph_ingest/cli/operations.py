"""`graph-ingest publish-plan` and `graph-ingest status`: put work in, ask where it is."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import JsonCommand, reports_errors
from graph_ingest.domain.failure_view import AttemptView, FailureView
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.store.failures import FailureAttempt
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.store.postgres.store import PostgresOperationStore

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
@click.argument("operation_id")
@click.option("--json", "as_json", is_flag=True, help="Print the operation as JSON.")
@reports_errors
def status(operation_id: str, as_json: bool) -> None:
    """Show where operation OPERATION_ID is: stage, attempts, timestamps, last error, every
    failure routed to a retry tier or the DLQ (error id, trace id, where, retry advice), and the
    extraction issues its plan was made with (candidates dropped, model output unusable).

    OPERATION_ID may also be the submission id `graph-ingest submit` printed: the operation its
    request was planned as is shown, or the planning DLQ entry it went to.

    Exit code 3 when the operation is unknown.

    \b
    Example:
      graph-ingest status op_3f2a… --json
    """
    from graph_ingest.producers.recovery import OperationNotFound
    from graph_ingest.wiring import postgres_store

    settings = load_settings()
    store = postgres_store(settings)
    store.start()
    try:
        found = _read_status(store, operation_id)
    finally:
        store.close()
    operation, submission = found.operation, found.submission
    if operation is None and submission is not None:
        _describe_unapplied(submission, as_json)
        return
    if operation is None:
        raise OperationNotFound(f"operation {operation_id} not found")
    if as_json:
        click.echo(json.dumps(_status_json(operation, found), indent=2))
    else:
        click.echo("\n".join(_status_lines(operation, found, settings.planner.max_replans)))


@dataclass(frozen=True, slots=True)
class _StatusRecords:
    """What `status` reads: the operation (None when unknown), the submission it was asked by
    (when OPERATION_ID was a submission id), its failures, replans, plan and extraction issues."""

    operation: Operation | None
    submission: Submission | None
    failures: list[FailureAttempt] = field(default_factory=list)
    replan: Replan | None = None
    made_by: Replan | None = None
    planned_by: Submission | None = None
    plan: IngestionPlan | None = None


def _read_status(store: PostgresOperationStore, operation_id: str) -> _StatusRecords:
    """The operation named ``operation_id``, or the one its submission was planned as."""
    submission = None
    operation = store.get_operation(operation_id)
    if operation is None:
        submission = store.get_submission(operation_id)
        if submission is not None and submission.operation_id is not None:
            operation = store.get_operation(submission.operation_id)
    if operation is None:
        return _StatusRecords(operation, submission)
    with store.unit_of_work() as uow:
        failures = uow.failure_history(operation.operation_id)
    return _StatusRecords(
        operation,
        submission,
        failures=failures,
        replan=store.get_replan(operation.operation_id),
        made_by=store.replan_making(operation.operation_id),
        planned_by=(
            submission
            if submission is not None
            else store.submission_of_operation(operation.operation_id)
        ),
        plan=_frozen_plan(store.get_plan_bytes(operation.operation_id)),
    )


def _status_json(operation: Operation, found: _StatusRecords) -> dict[str, object]:
    plan = found.plan
    document = {
        **operation.model_dump(mode="json"),
        "failures": [_failure_json(f) for f in found.failures],
        "replan": _replan_json(found.replan),
        "replan_of": _replan_json(found.made_by),
        "plan_kind": plan.kind.value if plan else None,
        "base_operation_id": plan.base_operation_id if plan else None,
        **_issues_json(found.planned_by),
    }
    if found.submission is not None:
        document["submission_id"] = found.submission.submission_id
    return document


def _status_lines(operation: Operation, found: _StatusRecords, max_replans: int) -> list[str]:
    lines = [
        _describe(operation),
        *_describe_plan(found.plan),
        *_describe_replans(found.replan, found.made_by, max_replans),
        *_describe_failures(found.failures),
        *_describe_issues(found.planned_by),
    ]
    if found.submission is not None:
        lines.insert(0, f"submission  {found.submission.submission_id}")
    return lines


def _describe_unapplied(submission: Submission, as_json: bool) -> None:
    """A submission whose request went to the DLQ, or whose plan no applier has taken yet."""
    if as_json:
        click.echo(
            json.dumps(
                {
                    "submission_id": submission.submission_id,
                    "space": submission.space,
                    "document_id": submission.document_id,
                    "operation_id": submission.operation_id,
                    "dlq_id": submission.dlq_id,
                    "trace_id": submission.trace_id,
                    **_issues_json(submission),
                },
                indent=2,
            )
        )
        return
    where = (
        f"not planned: DLQ entry {submission.dlq_id} (graph-ingest dlq show {submission.dlq_id})"
        if submission.dlq_id
        else f"planned as {submission.operation_id}, not applied yet"
    )
    lines = [
        f"submission  {submission.submission_id}",
        f"document    {submission.space}/{submission.document_id}",
        where,
        *_describe_issues(submission),
    ]
    click.echo("\n".join(lines))


def _issues_json(submission: Submission | None) -> dict[str, object]:
    """The extraction issues the submission's plan was made with (none known: an empty list)."""
    issues = submission.issues if submission else ()
    return {
        "issues": [asdict(issue) for issue in issues],
        "issue_count": submission.issue_count if submission else 0,
    }


def _frozen_plan(data: bytes | None) -> IngestionPlan | None:
    """The operation's stored plan, for its kind and base (None if missing or unreadable: the
    operation's own record still says where it is)."""
    from graph_ingest.schemas.codec import DecodeError, decode_plan

    if data is None:
        return None
    try:
        return decode_plan(data)
    except DecodeError:
        return None


def _describe_plan(plan: IngestionPlan | None) -> list[str]:
    if plan is None:
        return []
    base = plan.base_operation_id or "no state (a new document)"
    return [f"plan        {plan.kind.value}, planned on {base}"]


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


def _replan_json(replan: Replan | None) -> dict[str, object] | None:
    if replan is None:
        return None
    return {
        "conflicted": replan.operation_id,
        "submission_id": replan.submission_id,
        "attempt": replan.attempt,
        "outcome": replan.outcome.value,
        "replanned_as": replan.replanned_as,
        "dlq_id": replan.dlq_id,
        "at": replan.at.isoformat(),
    }


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


def _failure_json(failure: FailureAttempt) -> dict[str, object]:
    return {
        "attempt": failure.attempt,
        "tier": failure.tier,
        "routed_to": failure.routed_to,
        "at": failure.at.isoformat(),
        "source": list(failure.source) if failure.source else None,
        "detail": failure.detail.model_dump(mode="json"),
    }


def _describe_failures(failures: list[FailureAttempt]) -> list[str]:
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


def _describe(op: Operation) -> str:
    lines = [
        f"operation   {op.operation_id}",
        f"document    {op.space}/{op.document_id} (expected revision {op.expected_revision})",
        f"stage       {op.stage}",
        f"attempts    {op.attempts}",
        f"fingerprint {op.fingerprint}",
    ]
    lifecycle = list(Stage)
    times = sorted(op.stage_times.items(), key=lambda item: (item[1], lifecycle.index(item[0])))
    lines += [f"  {stage:<16}{at.isoformat()}" for stage, at in times]
    if op.last_error:
        error = op.last_error
        label = "reason" if op.stage in (Stage.CONFLICT, Stage.PARKED) else "last error"
        lines.append(f"{label:<12}{FailureView.of_error(error).headline}")
    if op.next_retry_at and op.stage is Stage.FAILED:
        lines.append(f"next retry  {op.next_retry_at.isoformat()}")
    if op.dlq_id and op.stage is Stage.DEAD_LETTERED:
        lines.append(f"dlq entry   {op.dlq_id} (graph-ingest dlq show {op.dlq_id})")
    return "\n".join(lines)
