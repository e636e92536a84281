"""`graph-ingest submit` and `graph-ingest retract`: documents in, as ingest requests."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from graph_ingest.cli.config import load_settings
from graph_ingest.cli.exit_codes import ExitCode, JsonCommand, reports_errors
from graph_ingest.cli.params import TIME_EXAMPLE, AwareDateTime, Duration
from graph_ingest.domain.request import IngestRequest, RequestKind, StaleRelationPolicy
from graph_ingest.planning.graph_schema import load_graph_schema
from graph_ingest.producers.follow import Followed
from graph_ingest.producers.request_files import RequestDefaults, read_requests
from graph_ingest.schemas.request_messages import Submitted
from graph_ingest.settings import Settings

# Requests handed to the producer per flush (one acknowledgement wait each).
_CHUNK = 200

_STALE = {
    "keep": StaleRelationPolicy.KEEP,
    "delete-if-unreferenced": StaleRelationPolicy.DELETE_IF_UNREFERENCED,
}


def _wait_options(command: Any) -> Any:
    command = click.option(
        "--timeout",
        type=Duration(),
        default="10m",
        show_default=True,
        help="With --wait: how long to wait for all of them.",
    )(command)
    command = click.option(
        "--wait",
        is_flag=True,
        help="Follow every request to its final stage, then until the read tables show it (so "
        "`status` right after never shows an older stage; a projector that has not caught up "
        "within PROJECTOR__STALLED_AFTER_S is reported, not waited for); exit 6 if any did not "
        "complete (refused by the planner, CONFLICT, DEAD_LETTERED, or still running at "
        "--timeout).",
    )(command)
    return click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")(
        command
    )


@click.command("submit", cls=JsonCommand)
@click.argument("source", type=click.Path(exists=True, allow_dash=True, path_type=Path))
@click.option("--space", help="The space of the documents (a JSONL line may name its own).")
@click.option(
    "--document-id",
    help="The document id of a single file or of stdin (default: the file's name; in a "
    "directory, each file's path relative to it).",
)
@click.option("--version", "document_version", help="Document version (default: content hash).")
@click.option(
    "--schema-version",
    help="Graph schema version to plan with (default: the version of the schema file that "
    "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA names).",
)
@click.option(
    "--stale-relations",
    type=click.Choice(sorted(_STALE)),
    default="delete-if-unreferenced",
    show_default=True,
    help="What happens to relations an earlier version stated and this one no longer does.",
)
@click.option("--batch-id", help="Tag every request of this run with a batch id.")
@click.option(
    "--source-updated-at",
    type=AwareDateTime(),
    metavar="TIME",
    help="When the source last changed the document(s), ISO 8601 with a timezone, e.g. "
    f"{TIME_EXAMPLE}. The planner refuses a request older than the time its document's "
    "state already has (out of order). Default: none given.",
)
@_wait_options
@reports_errors
def submit(
    source: Path,
    space: str | None,
    document_id: str | None,
    document_version: str | None,
    schema_version: str | None,
    stale_relations: str,
    batch_id: str | None,
    source_updated_at: datetime | None,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Submit documents to the planner as ingest requests (topic ingest.requests).

    SOURCE is a UTF-8 text file, - (stdin), a directory (one document per file, its path
    relative to the directory as document id), or a .jsonl file of requests, one JSON
    IngestRequest per line (space, document_id, document_version, schema_version, content or
    content_ref + content_hash, options, candidates...; --space, --schema-version and
    --source-updated-at fill in what a line leaves out).

    Every request is read and checked before anything is sent: a malformed or oversized one
    (above GRAPH_INGEST_TOPICS__MAX_MESSAGE_BYTES) is an error naming it, and nothing is sent
    (exit 5). Each line of output is a submission id, the document and its trace id; `graph-ingest
    status <submission id>` shows what became of it.

    \b
    Examples:
      graph-ingest submit --space kb --document-id notes-1 notes.txt
      graph-ingest submit --space kb --source-updated-at 2026-12-01T09:30:00Z notes.txt
      cat notes.txt | graph-ingest submit --space kb --document-id notes-1 --wait -
      graph-ingest submit --space kb corpus/
      graph-ingest submit --wait --timeout 5m requests.jsonl
    """
    settings = load_settings()
    defaults = RequestDefaults(
        space=space,
        document_id=document_id,
        document_version=document_version,
        schema_version=_schema_version(settings, schema_version),
        stale_relation_policy=_STALE[stale_relations],
        batch_id=batch_id,
        source_updated_at=source_updated_at,
    )
    requests = read_requests(source, defaults, stdin=sys.stdin)
    _send_and_report(settings, requests, wait=wait, timeout_s=timeout, as_json=as_json)


@click.command("retract", cls=JsonCommand)
@click.option("--space", required=True, help="The document's space.")
@click.option("--document-id", required=True, help="The document to retract.")
@click.option(
    "--version",
    "document_version",
    default="retracted",
    show_default=True,
    help="The version this retraction is recorded as.",
)
@click.option(
    "--schema-version",
    help="Graph schema version recorded with the retraction (default: that of the schema file "
    "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA names; a retraction does not depend on it).",
)
@_wait_options
@reports_errors
def retract(
    space: str,
    document_id: str,
    document_version: str,
    schema_version: str | None,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Ask the planner to retract a document: its facts leave the graph (shared ones stay while
    another document supports them).

    \b
    Example:
      graph-ingest retract --space kb --document-id notes-1 --wait
    """
    settings = load_settings()
    recorded = schema_version or _configured_schema_version(settings) or _UNSPECIFIED
    request = RequestDefaults.build(
        lambda: IngestRequest(
            kind=RequestKind.RETRACT,
            space=space,
            document_id=document_id,
            document_version=document_version,
            schema_version=recorded,
        ),
        where=f"{space}/{document_id}",
    )
    _send_and_report(settings, [request], wait=wait, timeout_s=timeout, as_json=as_json)


_UNSPECIFIED = "unspecified"


def _configured_schema_version(settings: Settings) -> str | None:
    path = settings.planner.graph_schema
    return None if path is None else load_graph_schema(path).version


def _schema_version(settings: Settings, given: str | None) -> str:
    """The schema version requests are planned with: ``--schema-version``, else the version of
    the configured schema file. The planner refuses a request naming another version."""
    version = given or _configured_schema_version(settings)
    if version is None:
        raise click.UsageError(
            "no graph schema version: pass --schema-version, or set "
            "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA to the planner's schema file (its version is used)"
        )
    return version


def _send_and_report(
    settings: Settings,
    requests: Sequence[IngestRequest],
    *,
    wait: bool,
    timeout_s: float,
    as_json: bool,
) -> None:
    from graph_ingest.producers.ingest_producer import IngestProducer
    from graph_ingest.schemas.request_messages import request_message

    for request in requests:  # every one checked before the first is sent
        request_message(
            request, settings.topics.requests, max_bytes=settings.topics.max_message_bytes
        )
    submitted: list[Submitted] = []
    with (
        IngestProducer(settings) as producer,
        click.progressbar(length=len(requests), label="submitting", file=sys.stderr) as bar,
    ):
        for start in range(0, len(requests), _CHUNK):
            chunk = requests[start : start + _CHUNK]
            submitted.extend(producer.submit_many(chunk))
            bar.update(len(chunk))
    click.echo(f"submitted {len(submitted)} request(s) to {settings.topics.requests}", err=True)
    followed = _follow(settings, submitted, timeout_s) if wait else None
    if as_json:
        click.echo(json.dumps([_json(s, followed) for s in submitted], indent=2))
    else:
        for s in submitted:
            where = f"  {followed[s.submission_id].where}" if followed else ""
            click.echo(f"{s.submission_id} {s.key} trace {s.trace_id}{where}")
    if followed is not None:
        _report_followed(list(followed.values()))


@dataclass(frozen=True, slots=True)
class _Waited:
    """Where a submission ended on the write side, and whether the read tables show it."""

    followed: Followed
    projected: bool

    @property
    def where(self) -> str:
        if self.projected:
            return self.followed.where
        return f"{self.followed.where} (not in the read tables yet)"


def _follow(
    settings: Settings, submitted: Sequence[Submitted], timeout_s: float
) -> dict[str, _Waited]:
    """Follow each submission to its final stage (the write side), then wait, within what is
    left of ``timeout_s`` and at most PROJECTOR__STALLED_AFTER_S, for the read tables to show
    the operations it ended with."""
    from graph_ingest.cli.ops import read_service
    from graph_ingest.producers.follow import follow

    deadline = time.monotonic() + timeout_s
    with read_service(settings) as (queries, store):
        with click.progressbar(length=len(submitted), label="waiting", file=sys.stderr) as bar:
            results = follow(
                store,
                [s.submission_id for s in submitted],
                timeout_s=timeout_s,
                on_final=lambda _: bar.update(1),
            )
        ended = [f.operation.operation_id for f in results if f.operation is not None]
        left = min(deadline - time.monotonic(), settings.projector.stalled_after_s)
        seen = queries.wait_until_all_projected(ended, max(left, 0.0))
    return {
        f.submission_id: _Waited(f, f.operation is None or seen[f.operation.operation_id].current)
        for f in results
    }


def _report_followed(waited: Sequence[_Waited]) -> None:
    """How many completed (exit 6 unless all), and a warning if the read tables lag."""
    lagging = sum(not w.projected for w in waited)
    if lagging:
        click.echo(
            f"warning: {lagging} not in the read tables yet: `graph-ingest status` may show an "
            "older stage (is `graph-ingest worker projector` running? graph-ingest projections "
            "status)",
            err=True,
        )
    done = sum(w.followed.completed for w in waited)
    click.echo(f"{done} of {len(waited)} completed", err=True)
    if done < len(waited):
        raise SystemExit(ExitCode.NOT_COMPLETED)


def _json(submitted: Submitted, followed: dict[str, _Waited] | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "submission_id": submitted.submission_id,
        "key": submitted.key,
        "trace_id": submitted.trace_id,
    }
    if followed is not None:
        waited = followed[submitted.submission_id]
        f = waited.followed
        document.update(
            completed=f.completed,
            projected=waited.projected,
            where=waited.where,
            operation_id=f.operation.operation_id if f.operation else None,
            stage=f.operation.stage.value if f.operation else None,
            dlq_id=f.submission.dlq_id if f.submission else None,
        )
    return document
