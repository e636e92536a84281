"""`graph-ingest publish-plan` and `graph-ingest status`: put work in, ask where it is."""

import json
from pathlib import Path

import click

from graph_ingest.cli.exit_codes import ExitCode, reports_errors
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.settings import Settings


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
    publisher = PlanPublisher(Settings())
    publisher.start()
    try:
        publisher.publish(plans)
    finally:
        publisher.close()
    for plan in plans:
        click.echo(f"published {plan.operation_id} {plan.key} {plan.fingerprint}")


@click.command("status")
@click.argument("operation_id")
@click.option("--json", "as_json", is_flag=True, help="Print the operation as JSON.")
@reports_errors
def status(operation_id: str, as_json: bool) -> None:
    """Show where operation OPERATION_ID is: stage, attempts, timestamps, last error.

    Exit code 3 when the operation is unknown.

    \b
    Example:
      graph-ingest status op_3f2a… --json
    """
    from graph_ingest.consumers.wiring import postgres_store

    store = postgres_store(Settings())
    store.start()
    try:
        operation = store.get_operation(operation_id)
    finally:
        store.close()
    if operation is None:
        click.echo(f"operation {operation_id} not found", err=True)
        raise SystemExit(ExitCode.NOT_FOUND)
    click.echo(
        json.dumps(operation.model_dump(mode="json"), indent=2) if as_json else _describe(operation)
    )


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
        lines.append(f"{label:<12}{error.code} {error.error_class}: {error.message}")
    if op.next_retry_at:
        lines.append(f"next retry  {op.next_retry_at.isoformat()}")
    return "\n".join(lines)
