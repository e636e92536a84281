"""What the DLQ tools show, pure: entries as table rows and JSON, one entry in full, the stats,
a replay run. ``now`` (the database's clock, the one of ``--older-than``) is passed in.

Given the requests topic (``requests_topic``), a planning entry is shown as the request it holds
(``dlq.request_views``): its submission, space and document, never as a plan that does not
decode; without it (callers that have not adopted it yet) every entry is shown as a plan's."""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from graph_ingest.dlq.purge import Purged
from graph_ingest.dlq.replay import PlanSource, decoded_plan
from graph_ingest.dlq.replayer import Action, ReplayItem, ReplayReport
from graph_ingest.dlq.request_views import RequestSummary, request_summary
from graph_ingest.domain.dlq import DlqEnvelope, DlqStatus
from graph_ingest.domain.failure_view import AttemptView, FailureView
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.store.dlq_index import DlqEntry, DlqStats


def format_age(seconds: float) -> str:
    """``42s``, ``5m12s``, ``3h05m``, ``2d04h``: two units at most, rounded down."""
    whole = max(int(seconds), 0)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _age(entry: DlqEntry, now: datetime) -> float:
    return (now - entry.dead_lettered_at).total_seconds()


def _document(entry: DlqEntry) -> str:
    return f"{entry.space}/{entry.document_id}" if entry.space else "-"


def request_of(entry: DlqEntry, requests_topic: str | None) -> RequestSummary | None:
    """The request a planning entry holds; None for a plan's entry (or no requests topic)."""
    if requests_topic is None or entry.original_topic != requests_topic:
        return None
    return request_summary(entry, decode_dlq_envelope(entry.envelope), requests_topic)


# -- entries ------------------------------------------------------------------------------------


def entry_json(
    entry: DlqEntry, now: datetime, *, requests_topic: str | None = None
) -> dict[str, Any]:
    """The index row; with ``requests_topic``, also ``request``: the request of a planning
    entry (None for a plan's)."""
    shown = _entry_fields(entry, now)
    if requests_topic is None:
        return shown
    request = request_of(entry, requests_topic)
    return {**shown, "request": asdict(request) if request else None}


def _entry_fields(entry: DlqEntry, now: datetime) -> dict[str, Any]:
    return {
        "dlq_id": entry.dlq_id,
        "status": entry.status.value,
        "code": entry.code.value,
        "error_class": entry.error_class,
        "message": entry.message,
        "operation_id": entry.operation_id,
        "fingerprint": entry.fingerprint,
        "space": entry.space,
        "document_id": entry.document_id,
        "parked_behind": entry.parked_behind,
        "original_topic": entry.original_topic,
        "original_partition": entry.original_partition,
        "original_offset": entry.original_offset,
        "attempts": entry.attempts,
        "dead_lettered_at": entry.dead_lettered_at.isoformat(),
        "age_s": round(_age(entry, now), 3),
    }


_COLUMNS = ("DLQ ID", "STATUS", "CODE", "AGE", "ATTEMPTS", "DOCUMENT", "OPERATION")


def entry_table(
    entries: list[DlqEntry], now: datetime, *, requests_topic: str | None = None
) -> list[str]:
    """A header and one line per entry, columns aligned; a sentence when there are none. A
    planning entry's last column names its request's submission (with ``requests_topic``)."""
    if not entries:
        return ["no DLQ entries match"]
    rows = [_COLUMNS] + [
        (
            e.dlq_id,
            e.status.value,
            e.code.value,
            format_age(_age(e, now)),
            str(e.attempts),
            _document(e),
            _subject(e, request_of(e, requests_topic)),
        )
        for e in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def _subject(entry: DlqEntry, request: RequestSummary | None) -> str:
    """What the entry holds: its operation, or the request of a submission never planned."""
    if request is not None:
        return f"request {request.submission_id or '(no submission id)'}"
    return entry.operation_id or "-"


# -- one entry ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanSummary:
    operation_id: str
    space: str
    document_id: str
    expected_revision: int
    kind: str
    fingerprint: str
    node_upserts: int
    edge_upserts: int
    node_deletes: int
    edge_deletes: int

    @classmethod
    def of(cls, plan: IngestionPlan) -> PlanSummary:
        m = plan.mutation
        return cls(
            operation_id=plan.operation_id,
            space=plan.space,
            document_id=plan.document_id,
            expected_revision=plan.expected_revision,
            kind=plan.kind.value,
            fingerprint=plan.fingerprint,
            node_upserts=len(m.node_upserts),
            edge_upserts=len(m.edge_upserts),
            node_deletes=len(m.node_deletes),
            edge_deletes=len(m.edge_deletes),
        )

    def line(self) -> str:
        return (
            f"{self.operation_id} {self.kind} {self.space}/{self.document_id} revision "
            f"{self.expected_revision} -> {self.expected_revision + 1}: "
            f"{self.node_upserts} node upserts, {self.edge_upserts} edge upserts, "
            f"{self.node_deletes} node deletes, {self.edge_deletes} edge deletes"
        )


def plan_summary(envelope: DlqEnvelope) -> PlanSummary | str:
    """The summary of the dead-lettered message's plan, or why its value is no plan."""
    plan = decoded_plan(envelope.original_value)
    return PlanSummary.of(plan) if isinstance(plan, IngestionPlan) else plan


def show_json(
    entry: DlqEntry,
    envelope: DlqEnvelope,
    operation: Operation | None,
    now: datetime,
    *,
    requests_topic: str | None = None,
) -> dict[str, Any]:
    """The entry in full; with ``requests_topic``, a planning entry has its ``request`` and no
    ``plan`` (None), a plan's entry ``request`` None."""
    request = request_summary(entry, envelope, requests_topic) if requests_topic else None
    shown = {
        **_entry_fields(entry, now),
        "note": envelope.note,
        "operation_stage": operation.stage.value if operation else None,
        "plan": None if request else _plan_json(plan_summary(envelope)),
        "envelope": envelope.model_dump(mode="json"),
    }
    if requests_topic is None:
        return shown
    return {**shown, "request": asdict(request) if request else None}


def _plan_json(summary: PlanSummary | str) -> dict[str, Any]:
    if isinstance(summary, PlanSummary):
        return {"decodes": True, **asdict(summary)}
    return {"decodes": False, "error": summary}


def _text(value: bytes | None) -> str:
    """Bytes as text when they are UTF-8, else as base64 (marked)."""
    if value is None:
        return "-"
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode("ascii")


def show_lines(
    entry: DlqEntry,
    envelope: DlqEnvelope,
    operation: Operation | None,
    now: datetime,
    *,
    requests_topic: str | None = None,
) -> list[str]:
    """The entry in full; a planning entry (with ``requests_topic``) as the request it holds,
    and what its replay does."""
    where = envelope.original_topic
    if envelope.original_partition is not None:
        where += f"[{envelope.original_partition}]@{envelope.original_offset}"
    request = request_summary(entry, envelope, requests_topic) if requests_topic else None
    lines = [
        f"dlq entry     {entry.dlq_id}",
        f"status        {entry.status}" + (f": {envelope.note}" if envelope.note else ""),
        _holds(entry, operation, request),
        f"document      {_document(entry)}",
        f"error         {FailureView(entry.code, entry.error_class, entry.message).headline}",
        f"from          {where} key {_text(envelope.original_key)}",
        f"dead-lettered {entry.dead_lettered_at.isoformat()} ({format_age(_age(entry, now))} ago)"
        f" after {entry.attempts} attempt(s)",
    ]
    if entry.parked_behind:
        lines.append(f"parked behind {entry.parked_behind}")
    if request is None:
        summary = plan_summary(envelope)
        plan_line = summary.line() if isinstance(summary, PlanSummary) else f"none: {summary}"
        lines.append(f"plan          {plan_line}")
    elif request.decodes:
        lines.append(f"replay        submits the request again to {requests_topic}: planned afresh")
    else:
        lines.append("replay        refused: it holds no request to submit again (purge it)")
    headers = ", ".join(f"{h.key}={_text(h.value)}" for h in envelope.original_headers)
    lines.append(f"headers       {headers or '-'}")
    return [*lines, "attempts", *_attempt_lines(envelope)]


def _holds(entry: DlqEntry, operation: Operation | None, request: RequestSummary | None) -> str:
    """The line that says what the entry holds: a request never planned, or an operation."""
    if request is not None:
        return f"request       {request.line()}"
    stage = f" (stage {operation.stage})" if operation else " (no operation)"
    return f"operation     {entry.operation_id or '-'}" + (stage if entry.operation_id else "")


def _attempt_lines(envelope: DlqEnvelope) -> list[str]:
    lines = []
    for i, record in enumerate(envelope.attempts):
        if i == 1 and envelope.folded_attempts:
            lines.append(f"  … {envelope.folded_attempts} attempts folded")
        a = AttemptView.of_record(record)
        lines.append(
            f"  #{a.attempt:<3} {a.at.isoformat()} {a.where():<7} {a.failure.headline} "
            f"(worker {a.worker_id}, {a.code_version}, trace {a.trace_id})"
        )
    return lines


def purge_json(purged: Purged, note: str, now: datetime) -> dict[str, Any]:
    """A purge: the entry RESOLVED with its note, and the versions it moved to CONFLICT."""
    followers = [
        {"operation_id": f.operation_id, "expected_revision": f.expected_revision}
        for f in purged.followers
    ]
    return {**entry_json(purged.entry, now), "note": note, "conflicted": followers}


# -- stats ----------------------------------------------------------------------------------------


def stats_json(stats: DlqStats) -> dict[str, Any]:
    return {
        "total": stats.total,
        "by_status": {status.value: n for status, n in stats.by_status().items()},
        "by_code": {code.value: n for code, n in stats.by_code().items()},
        "by_code_and_status": [
            {"code": c.code.value, "status": c.status.value, "entries": c.entries}
            for c in stats.counts
        ],
        "oldest_pending_age_s": stats.oldest_pending_age_s,
    }


def stats_lines(stats: DlqStats) -> list[str]:
    by_status = stats.by_status()
    oldest = stats.oldest_pending_age_s
    lines = [
        f"DLQ: {stats.total} entries: "
        + ", ".join(f"{n} {status}" for status, n in by_status.items())
        + (f"; oldest pending {format_age(oldest)}" if oldest is not None else "")
    ]
    if not stats.counts:
        return lines
    statuses = list(DlqStatus)
    width = max(len("CODE"), *(len(code) for code in stats.by_code()))
    lines.append("  ".join(["CODE".ljust(width), *(s.value for s in statuses)]))
    cells = {(c.code, c.status): c.entries for c in stats.counts}
    for code in stats.by_code():
        counts = [str(cells.get((code, s), 0)).rjust(len(s.value)) for s in statuses]
        lines.append("  ".join([code.value.ljust(width), *counts]))
    return lines


# -- replay runs ----------------------------------------------------------------------------------


def replay_item_json(item: ReplayItem) -> dict[str, Any]:
    entry = item.entry
    return {
        "dlq_id": entry.dlq_id,
        "action": item.action.value,
        "status": entry.status.value,
        "operation_id": entry.operation_id,
        "space": entry.space,
        "document_id": entry.document_id,
        "code": entry.code.value,
        "source": None if item.source is None else item.source.value,
        "reason": item.reason,
        "error": None if item.error is None else item.error.model_dump(mode="json"),
    }


def replay_item_line(item: ReplayItem) -> str:
    entry = item.entry
    held = "request" if item.source is PlanSource.REQUEST else entry.operation_id or "-"
    line = f"{item.action.value:<12} {entry.dlq_id} {held} {_document(entry)}"
    if item.error is not None:
        line += f": {item.error.code} {item.error.message}"
    elif item.reason:
        line += f": {item.reason}"
    return line


def replay_report_json(report: ReplayReport) -> dict[str, Any]:
    return {
        "dry_run": report.dry_run,
        "interrupted": report.interrupted,
        "stopped": None if report.stopped is None else report.stopped.model_dump(mode="json"),
        "entries": [replay_item_json(item) for item in report.items],
        "summary": {
            "seen": len(report.items),
            **{action.value: report.count(action) for action in Action},
        },
    }


def replay_summary(report: ReplayReport) -> str:
    counts = ", ".join(f"{report.count(a)} {a.value}" for a in Action)
    line = f"replay-all{' --dry-run' if report.dry_run else ''}: {len(report.items)} seen: {counts}"
    if report.stopped is not None:
        line += f"; stopped: {report.stopped.code} {report.stopped.message}"
    if report.interrupted:
        line += "; interrupted: run it again to go on"
    return line


__all__ = [
    "PlanSummary",
    "entry_json",
    "entry_table",
    "format_age",
    "plan_summary",
    "purge_json",
    "replay_item_json",
    "replay_item_line",
    "replay_report_json",
    "replay_summary",
    "request_of",
    "show_json",
    "show_lines",
    "stats_json",
    "stats_lines",
]
