"""`graph-ingest dlq list | show | stats | replay | replay-all | purge | reindex`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.dlq_common import (
    actor_options,
    dlq_query,
    dlq_replayer,
    dlq_store,
    echo_json,
    entry_filters,
    redrive_tasks,
)
from graph_ingest.cli.dlq_tasks import follow_task, task, tasks
from graph_ingest.cli.exit_codes import ExitCode, JsonCommand, reports_errors
from graph_ingest.domain.dlq import DlqStatus

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.dlq.replayer import ReplayReport


@click.group("dlq")
def dlq() -> None:
    """The dead-letter queue: plans that failed for good, kept with their whole history.

    The index of entries lives in PostgreSQL; the DLQ topic (<plans>.dlq) holds the newest
    envelope of every entry, so `dlq reindex` can rebuild the index from it. An entry is
    PENDING_REVIEW until it is replayed (REPLAYED) or purged (RESOLVED, kept for audit).

    \b
    Examples:
      graph-ingest dlq stats
      graph-ingest dlq list --status PENDING_REVIEW --older-than 1h
      graph-ingest dlq replay-all --code FAILED_PRECONDITION --dry-run
      graph-ingest dlq replay-all --space research --rate 10 --reason "Neo4j is back"
      graph-ingest dlq tasks
    """


@dlq.command("list", cls=JsonCommand)
@click.option(
    "--status",
    type=click.Choice([s.value for s in DlqStatus], case_sensitive=False),
    metavar="STATUS",
    help="Only entries with this status: PENDING_REVIEW, REPLAYED or RESOLVED.",
)
@entry_filters(limit_default=100, limit_help="Show at most this many entries, oldest first.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@reports_errors
def list_entries(status: str | None, code: str | None, as_json: bool, **filters: Any) -> None:
    """List DLQ entries, oldest first: status, last error code, age, attempts, document, and the
    operation it holds (or "request SUBMISSION_ID" for a request that could not be planned).

    \b
    Examples:
      graph-ingest dlq list --status PENDING_REVIEW --code FAILED_PRECONDITION
      graph-ingest dlq list --space research --older-than 5m --json | jq '.entries[].dlq_id'
    """
    from graph_ingest.dlq.views import entry_json, entry_table

    query = dlq_query(status, code, **filters)
    settings = load_settings()
    requests = settings.topics.requests
    with dlq_store(settings) as store:
        entries = store.list_dlq_entries(query)
        now = store.database_time()
        more = len(entries) == query.limit and store.count_dlq_entries(query) > len(entries)
    if as_json:
        echo_json({"entries": [entry_json(e, now, requests_topic=requests) for e in entries]})
        return
    for line in entry_table(entries, now, requests_topic=requests):
        click.echo(line)
    if more:
        click.echo(f"(the oldest {len(entries)} shown: --limit to see more)")


@dlq.command("show", cls=JsonCommand)
@click.argument("dlq_id")
@click.option("--json", "as_json", is_flag=True, help="Print the entry and its envelope as JSON.")
@reports_errors
def show(dlq_id: str, as_json: bool) -> None:
    """Show DLQ entry DLQ_ID: its envelope, every attempt, and the plan it holds; a planning
    entry (a request that could not be planned) shows the request: its submission, space,
    document and version, and what its replay does.

    The original key, value and headers are kept byte for byte (base64 in JSON); "repeat
    failures" counts how often a replay of the entry failed again. Exit code 3 for an unknown id.

    \b
    Example:
      graph-ingest dlq show dlq-3f2a… --json | jq '.envelope.attempts'
    """
    from graph_ingest.dlq.errors import DlqEntryNotFound
    from graph_ingest.dlq.views import show_json, show_lines
    from graph_ingest.schemas.codec import decode_dlq_envelope

    settings = load_settings()
    with dlq_store(settings) as store:
        entry = store.get_dlq_entry(dlq_id)
        if entry is None:
            raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
        operation = store.get_operation(entry.operation_id) if entry.operation_id else None
        now = store.database_time()
        repeats = store.repeat_failures(dlq_id)
    envelope = decode_dlq_envelope(entry.envelope)
    requests = settings.topics.requests
    if as_json:
        shown = show_json(entry, envelope, operation, now, requests_topic=requests)
        echo_json({**shown, "repeat_failures": repeats})
        return
    for line in show_lines(entry, envelope, operation, now, requests_topic=requests):
        click.echo(line)
        if line.startswith("status "):
            click.echo(f"repeat failures {repeats} (replays of it that failed again)")


@dlq.command("stats", cls=JsonCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@reports_errors
def stats(as_json: bool) -> None:
    """Count DLQ entries by status and by last error code; say how old the oldest pending is.

    \b
    Example:
      graph-ingest dlq stats --json | jq '.oldest_pending_age_s'
    """
    from graph_ingest.dlq.views import stats_json, stats_lines

    with dlq_store(load_settings()) as store:
        found = store.dlq_stats()
    if as_json:
        echo_json(stats_json(found))
        return
    for line in stats_lines(found):
        click.echo(line)


@dlq.command("replay", cls=JsonCommand)
@click.argument("dlq_id")
@click.option("--force", is_flag=True, help="Replay an entry that was REPLAYED already.")
@actor_options
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@reports_errors
def replay(dlq_id: str, force: bool, by: str, reason: str | None, as_json: bool) -> None:
    """Re-publish the frozen plan of DLQ entry DLQ_ID to the plans topic, then mark it REPLAYED.

    The plan goes back unchanged, with its operation id (the operation's stored plan, else the
    dead-lettered message) and the header dlq_replay=DLQ_ID; if it fails again, it returns to
    this entry with its history extended. A planning entry (a request that could not be planned:
    its original topic is the requests topic) submits its request again, as the producer sent
    it, with dlq_replay=DLQ_ID: the planner plans it afresh. Refused (exit 5) for a RESOLVED entry, a REPLAYED one
    without --force, a CONFLICT (the plan is stale: a replan is needed), a COMPLETED operation,
    an entry that holds no plan (purge it), and a version that followed its predecessor to the
    DLQ while that one is pending (replay that one: this one is released when it completes).
    Exit code 3 for an unknown id. The replay is recorded in the audit log.

    \b
    Example:
      graph-ingest dlq replay dlq-3f2a… --reason "Ghost 1 exists now"
    """
    from graph_ingest.dlq.audit import AuditAction
    from graph_ingest.dlq.views import replay_item_json, request_of

    settings = load_settings()
    with dlq_replayer(settings) as (replayer, audit):
        item = replayer.replay(dlq_id, force=force)
        audit.record(
            action=AuditAction.DLQ_REPLAY,
            by=by,
            target=[dlq_id],
            reason=reason,
            details={"force": force, "source": str(item.source)},
        )
    if as_json:
        echo_json(replay_item_json(item))
        return
    request = request_of(item.entry, settings.topics.requests)
    if request is not None:
        done = (
            f"(submission {request.submission_id or '-'}, {request.space}/{request.document_id}): "
            f"request re-submitted to {settings.topics.requests}, to be planned afresh "
            "(`graph-ingest status SUBMISSION_ID` follows it)"
        )
    else:
        done = f"{item.entry.operation_id}: plan re-published to {settings.topics.plans}"
    line = f"replayed {item.entry.dlq_id} {done}"
    click.echo(line + (f"; {item.reason}" if item.reason else ""))


def replay_exit_code(report: ReplayReport) -> ExitCode:
    """A dry run that ran exits 0: the entries it would refuse are its answer, not a failure."""
    from graph_ingest.dlq.replayer import Action

    if report.stopped is not None:
        return ExitCode.UNAVAILABLE
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if not report.dry_run and (report.count(Action.REFUSED) or report.count(Action.FAILED)):
        return ExitCode.ERROR
    return ExitCode.OK


@dlq.command("replay-all", cls=JsonCommand)
@entry_filters(
    limit_default=None,
    limit_help="Take at most this many entries, refused ones included [default: all].",
)
@click.option("--dry-run", is_flag=True, help="Change nothing: list what would be replayed.")
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Replay at most this many entries per second [default: no limit].",
)
@actor_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def replay_all(
    code: str | None,
    dry_run: bool,
    rate: float | None,
    by: str,
    reason: str | None,
    as_json: bool,
    **filters: Any,
) -> None:
    """Replay every PENDING_REVIEW entry the filters select, oldest first, as a redrive task.

    The task runs in this process and is followed with a progress bar (plain lines on stderr
    when it is no terminal, or with --json); `dlq task show ID` follows it from elsewhere and
    `dlq task cancel ID` stops it from any process. One task runs at a time per DLQ: a second
    is refused (exit 5), naming the one that runs. Each entry is marked REPLAYED as soon as
    Kafka has acknowledged its plan, so a run that is interrupted (Ctrl-C or SIGTERM cancel the
    task after the entry in hand, exit 130) goes on where it stopped when run again. An entry
    that cannot be replayed (see `dlq replay --help`) is reported and the others go on; one
    waiting behind a version in the DLQ is released when that one, replayed, completes. Exit
    code 0 when every entry was replayed (or waits), 1 when some were refused or failed, 4 when
    a service is unavailable. A --dry-run starts no task and exits 0 when it ran: the entries
    it would refuse are listed with their reasons. The start (and a cancel) are recorded in
    the audit log.

    \b
    Examples:
      graph-ingest dlq replay-all --code FAILED_PRECONDITION --dry-run
      graph-ingest dlq replay-all --older-than 10m --rate 20 --reason "Neo4j fixed" --json
      graph-ingest dlq replay-all --class GraphConstraintError --from 2026-12-01T09:00:00Z
    """
    from graph_ingest.cli.signals import stopping_on_signals
    from graph_ingest.dlq.audit import local_actor
    from graph_ingest.dlq.views import replay_item_line, replay_report_json, replay_summary

    selection = dlq_query(None, code, **filters)
    actor = by or local_actor()
    with redrive_tasks(load_settings()) as redrive, stopping_on_signals() as stop:
        if dry_run:
            report = redrive.dry_run(selection).report
        else:
            running = redrive.start(selection, rate=rate, by=actor, reason=reason)
            report = follow_task(redrive, running, stop, by=actor, plain=as_json)
    if as_json:
        echo_json(replay_report_json(report))
    else:
        for item in report.items:
            click.echo(replay_item_line(item))
        click.echo(replay_summary(report))
    raise SystemExit(replay_exit_code(report))


@dlq.command("purge", cls=JsonCommand)
@click.argument("dlq_id")
@click.option("--reason", required=True, help="Why the entry needs no replay (kept as its note).")
@click.option(
    "--force",
    is_flag=True,
    help="Purge an entry that later versions wait behind; they become CONFLICT (replanned).",
)
@click.option(
    "--by", default="", metavar="NAME", help="Who acts, for the audit log [default: $USER@host]."
)
@click.option("--json", "as_json", is_flag=True, help="Print the resolved entry as JSON.")
@reports_errors
def purge(dlq_id: str, reason: str, force: bool, by: str, as_json: bool) -> None:
    """Resolve DLQ entry DLQ_ID: mark it RESOLVED with REASON; it is kept for audit.

    A RESOLVED entry is never replayed. When later versions of the document wait behind its
    operation (PARKED, or dead-lettered after it), purging it would strand them: the purge is
    refused (exit 5), naming them. With --force it goes on and moves each of them to CONFLICT
    (its own entry RESOLVED): the planner replans the document's newest submission on its
    committed state. Exit code 3 for an unknown id, 5 for one that is RESOLVED already. The
    purge, its reason and who did it are recorded in the audit log.

    \b
    Examples:
      graph-ingest dlq purge dlq-3f2a… --reason "document deleted upstream"
      graph-ingest dlq purge dlq-3f2a… --reason "bad extraction" --force
    """
    from graph_ingest.dlq.audit import Audit, AuditAction
    from graph_ingest.dlq.purge import purge as purge_entry
    from graph_ingest.dlq.views import entry_json

    settings = load_settings()
    with dlq_store(settings) as store:
        purged = purge_entry(store, settings.topics.dlq, dlq_id, reason, force=force)
        now = store.database_time()
        followers = [
            {"operation_id": f.operation_id, "expected_revision": f.expected_revision}
            for f in purged.followers
        ]
        Audit(store).record(
            action=AuditAction.DLQ_PURGE,
            by=by,
            target=[dlq_id],
            reason=reason,
            details={"force": force, "conflicted": followers},
        )
    entry = purged.entry
    if as_json:
        echo_json({**entry_json(entry, now), "note": reason.strip(), "conflicted": followers})
        return
    click.echo(f"resolved {entry.dlq_id} {entry.operation_id or '-'}: {reason.strip()}")
    for follower in purged.followers:
        click.echo(
            f"conflict {follower.operation_id} (expected revision {follower.expected_revision}): "
            "waited behind it, to be replanned on the committed state"
        )


@dlq.command("reindex", cls=JsonCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@reports_errors
def reindex(as_json: bool) -> None:
    """Rebuild the DLQ index in PostgreSQL from the DLQ topic, the newest envelope of each entry.

    Reads the topic from its beginning to its end (a reader of its own, no consumer group),
    then replaces every row in one transaction; DLQ messages still in the outbox count as
    newest. Safe while appliers run: they wait for the replacement to commit.

    \b
    Example:
      graph-ingest dlq reindex
    """
    from graph_ingest.dlq.reindex import reindex as rebuild

    settings = load_settings()
    with dlq_store(settings) as store:
        report = rebuild(store, settings)
    counts = {status.value: n for status, n in report.by_status.items()}
    if as_json:
        echo_json(
            {
                "topic": report.topic,
                "messages": report.messages,
                "entries": report.entries,
                "from_outbox": report.from_outbox,
                "undecodable": report.undecodable,
                "rows_before": report.rows_before,
                "by_status": counts,
            }
        )
        return
    click.echo(
        f"reindexed {report.entries} entries from {report.messages} messages of {report.topic} "
        f"({', '.join(f'{n} {s}' for s, n in counts.items())}; {report.from_outbox} from the "
        f"outbox, {report.undecodable} undecodable; {report.rows_before} rows before)"
    )


dlq.add_command(tasks)
dlq.add_command(task)
