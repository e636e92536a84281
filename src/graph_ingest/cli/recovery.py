"""`graph-ingest resume` and `graph-ingest recover`: take stranded operations up again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, JsonCommand, reports_errors
from graph_ingest.cli.params import Duration
from graph_ingest.domain.durations import format_duration
from graph_ingest.settings import Settings

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.domain.operation import Operation
    from graph_ingest.kafka.producer import KafkaProducer
    from graph_ingest.producers.recovery import Recovered, Recoverer, RecoveryReport
    from graph_ingest.store.postgres.store import PostgresOperationStore

# -- output ---------------------------------------------------------------------------------


def item_json(item: Recovered) -> dict[str, Any]:
    op = item.operation
    return {
        "operation_id": op.operation_id,
        "space": op.space,
        "document_id": op.document_id,
        "stage": op.stage.value,
        "updated_at": op.updated_at.isoformat(),
        "action": item.action.value,
        "claims": item.claims,
        "error": None if item.error is None else item.error.model_dump(mode="json"),
    }


def report_json(report: RecoveryReport) -> dict[str, Any]:
    from graph_ingest.producers.recovery import Action

    return {
        "claimed_by": report.claimed_by,
        "older_than_s": report.older_than_s,
        "limit": report.limit,
        "lease_s": report.lease_s,
        "operations": [item_json(item) for item in report.items],
        "stranded": [stranded_json(op) for op in report.stranded],
        "summary": {
            "claimed": len(report.items),
            **{action.value: report.count(action) for action in Action},
            "stranded": len(report.stranded),
        },
    }


def stranded_json(op: Operation) -> dict[str, Any]:
    return {
        "operation_id": op.operation_id,
        "space": op.space,
        "document_id": op.document_id,
        "stage": op.stage.value,
        "expected_revision": op.expected_revision,
        "updated_at": op.updated_at.isoformat(),
    }


def stranded_line(op: Operation) -> str:
    return (
        f"stranded {op.operation_id} {op.stage.value:<15} {op.space}/{op.document_id}: waits for "
        f"revision {op.expected_revision}, but its predecessor is gone (no operation on its way "
        "commits the revision before it): submit the document again"
    )


def item_line(item: Recovered) -> str:
    op = item.operation
    line = (
        f"{item.action.value:<8} {op.operation_id} {op.stage.value:<15} {op.space}/{op.document_id}"
    )
    if item.error is not None:
        line += f": {item.error.code} {item.error.message}"
    return line


def summary_line(report: RecoveryReport) -> str:
    from graph_ingest.producers.recovery import Action

    scope = (
        f"older than {format_duration(report.older_than_s)}, limit {report.limit}, "
        f"lease {format_duration(report.lease_s)}"
    )
    stranded = f"; {len(report.stranded)} PARKED stranded" if report.stranded else ""
    if not report.items:
        return f"recover: nothing to recover{stranded} ({scope})"
    counts = ", ".join(f"{report.count(a)} {a.value}" for a in Action)
    return (
        f"recover: {len(report.items)} claimed: {counts}{stranded} ({scope}; by "
        f"{report.claimed_by})"
    )


def exit_code(report: RecoveryReport) -> ExitCode:
    from graph_ingest.producers.recovery import Action

    if report.service_unavailable:
        return ExitCode.UNAVAILABLE
    if report.count(Action.FAILED) or report.count(Action.SKIPPED) or report.stranded:
        return ExitCode.ERROR
    return ExitCode.OK


# -- commands -------------------------------------------------------------------------------


@contextmanager
def _recoverer(
    settings: Settings,
) -> Iterator[tuple[Recoverer, PostgresOperationStore, KafkaProducer]]:
    from graph_ingest.kafka.producer import KafkaProducer
    from graph_ingest.producers.recovery import Recoverer
    from graph_ingest.wiring import postgres_store

    store = postgres_store(settings)
    producer = KafkaProducer(settings.kafka, flush_timeout_s=settings.recovery.publish_timeout_s)
    store.start()
    try:
        recoverer = Recoverer(
            store,
            producer,
            settings.topics.plans,
            settings.recovery,
            max_message_bytes=settings.topics.max_message_bytes,
        )
        yield recoverer, store, producer
    finally:
        producer.close()
        store.close()


@click.command("resume", cls=JsonCommand)
@click.argument("operation_id")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@reports_errors
def resume(operation_id: str, as_json: bool) -> None:
    """Re-publish the stored frozen plan of operation OPERATION_ID to the plans topic.

    The applier takes it up from where it stopped: FAILED and PARKED start again at PREPARED,
    GRAPH_APPLIED goes on at the state commit. The plan is not re-planned: the exact bytes stored
    at first admission are sent again, with the traceparent and submission_id it came with. A
    DEAD_LETTERED operation leaves the DLQ the one way there is: its DLQ entry is replayed (as
    `graph-ingest dlq replay` does) and marked REPLAYED. Exit code 3 for an unknown operation; 5
    for a COMPLETED one (nothing to do), a CONFLICT one (the plan is stale: replan), or a
    DEAD_LETTERED one whose entry refuses a replay (see `graph-ingest dlq replay --help`).

    \b
    Example:
      graph-ingest resume op_3f2a…
    """
    from graph_ingest.domain.stages import Stage
    from graph_ingest.producers.recovery import OperationNotFound

    settings = load_settings()
    with _recoverer(settings) as (recoverer, store, producer):
        operation = store.get_operation(operation_id)
        if operation is None:
            raise OperationNotFound(f"operation {operation_id} not found")
        if operation.stage is Stage.DEAD_LETTERED and operation.dlq_id:
            _replay_dead_lettered(settings, store, producer, operation, as_json=as_json)
            return
        claim = recoverer.resume(operation)
    op = claim.operation
    if as_json:
        click.echo(json.dumps(_resumed_json(op, settings, action="resumed", claims=claim.claims)))
    else:
        click.echo(
            f"resumed {op.operation_id} {op.stage.value} {op.space}/{op.document_id}: plan "
            f"re-published to {settings.topics.plans}"
        )


def _resumed_json(op: Operation, settings: Settings, **done: object) -> dict[str, object]:
    """What `resume --json` prints: the operation as it was, and what was done with it."""
    return {
        "operation_id": op.operation_id,
        "space": op.space,
        "document_id": op.document_id,
        "stage": op.stage.value,
        "topic": settings.topics.plans,
        **done,
    }


def _replay_dead_lettered(
    settings: Settings,
    store: PostgresOperationStore,
    producer: KafkaProducer,
    operation: Operation,
    *,
    as_json: bool,
) -> None:
    """Resume a DEAD_LETTERED operation by replaying its DLQ entry, which records it there."""
    from graph_ingest.dlq.replayer import DlqReplayer

    assert operation.dlq_id is not None
    item = DlqReplayer(store, producer, settings).replay(operation.dlq_id, by="resume")
    op = operation
    if as_json:
        shaped = _resumed_json(
            op,
            settings,
            action="replayed",
            dlq_id=item.entry.dlq_id,
            dlq_status=item.entry.status.value,
        )
        click.echo(json.dumps(shaped))
        return
    click.echo(
        f"resumed {op.operation_id} {op.stage.value} {op.space}/{op.document_id}: DLQ entry "
        f"{item.entry.dlq_id} replayed to {settings.topics.plans}"
        + (f"; {item.reason}" if item.reason else "")
    )


@click.command("recover", cls=JsonCommand)
@click.option(
    "--older-than",
    "older_than_s",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="Only operations unchanged for this long, e.g. 30s, 5m, 2h "
    "[default: GRAPH_INGEST_RECOVERY__OLDER_THAN_S, 5m].",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Claim at most this many operations [default: GRAPH_INGEST_RECOVERY__LIMIT, 100].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def recover(older_than_s: float | None, limit: int | None, as_json: bool) -> None:
    """Find operations that stopped short of COMPLETED and resume them, oldest first.

    Scans PREPARED, GRAPH_APPLIED, STATE_COMMITTED, FAILED and PARKED operations, skipping those
    with a retry scheduled in the future, and PARKED ones whose predecessor has not committed yet
    (its commit releases them). DEAD_LETTERED ones wait for a DLQ replay. Each one is claimed with a lease
    (GRAPH_INGEST_RECOVERY__LEASE_S), so recoverers running at the same time never take the same
    operation, and its stored plan is re-published. One that fails is reported and the others go
    on. PARKED operations whose predecessor is gone (nothing on its way commits the revision
    before theirs, e.g. its DLQ entry was purged) are reported as stranded: resuming them would
    only park them again. Exit code 0 when all went well, 1 when some failed or are stranded, 4
    when a service is unavailable.

    \b
    Examples:
      graph-ingest recover --older-than 10m --limit 50
      graph-ingest recover --json | jq '.summary'
    """
    settings = load_settings()
    recovery = settings.recovery
    with _recoverer(settings) as (recoverer, _store, _producer):
        report = recoverer.recover(
            older_than_s=recovery.older_than_s if older_than_s is None else older_than_s,
            limit=recovery.limit if limit is None else limit,
        )
    if as_json:
        click.echo(json.dumps(report_json(report), indent=2))
    else:
        for item in report.items:
            click.echo(item_line(item))
        for op in report.stranded:
            click.echo(stranded_line(op))
        click.echo(summary_line(report))
    raise SystemExit(exit_code(report))
