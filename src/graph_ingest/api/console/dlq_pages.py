"""The console's DLQ pages: the list with filters, one entry in full (its raw key and value as
hex and decoded, its attempts), and replay and purge, each behind a confirmation page that says
what will happen (which operation, which plan, which waiting versions a purge strands) before
the POST that does it with the operator's token (``tokens``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from graph_ingest.api.console.pages import failure_page, render
from graph_ingest.api.console.tokens import form_fields, require_cookie_token
from graph_ingest.api.console.views import (
    DLQ_PAGE,
    dlq_query,
    header_text,
    hex_lines,
    utf8_or_none,
)
from graph_ingest.api.errors import ApiError, http_status_of
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.dlq.errors import DlqRefused
from graph_ingest.dlq.purge import stranded_by
from graph_ingest.dlq.replay import Replay, RequestReplay
from graph_ingest.dlq.views import PlanSummary, format_age, plan_summary, stats_lines
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.failure_view import AttemptView
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.queries import InvalidQuery, encode_keyset
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.store.dlq_index import DlqEntry

router = APIRouter(include_in_schema=False)

Action = Literal["replay", "purge"]
LIVE_S = 5
IN_THE_CONSOLE = "in the console"


def _ages(services: ApiServices) -> Callable[[DlqEntry], str]:
    """How long ago an entry was dead-lettered, by the database's clock (the one that stamped
    it, and the one of ``dlq list --older-than``)."""
    now = services.store.database_time()
    return lambda entry: format_age((now - entry.dead_lettered_at).total_seconds())


@router.get("/ui/dlq", name="console_dlq")
def entries(request: Request) -> HTMLResponse:
    shown: dict[str, Any] = {
        "title": "Dead letters",
        "section": "dlq",
        "live": LIVE_S,
        "statuses": list(DlqStatus),
        "codes": list(StatusCode),
    }
    try:
        services = services_of(request)
        shown["age"] = _ages(services)
        query = dlq_query(request.query_params)
        size = query.limit or DLQ_PAGE
        listed = services.store.list_dlq_entries(
            replace(query, limit=size + 1)
        )  # one more: a next?
        shown["stats"] = stats_lines(services.store.dlq_stats())[0]
    except InvalidQuery as exc:
        return render(request, "dlq.html", **shown, query=dlq_query({}), entries=None,
                      stats=None, next_query=None, problem=exc.message, status_code=400)  # fmt: skip
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    page = listed[:size]
    following = None
    if len(listed) > size:
        cursor = encode_keyset(page[-1].dead_lettered_at, page[-1].dlq_id)
        following = urlencode({**request.query_params, "cursor": cursor})
    return render(request, "dlq.html", **shown, query=query, entries=page, next_query=following)


@router.get("/ui/dlq/{dlq_id}", name="console_dlq_entry")
def entry(request: Request, dlq_id: str) -> HTMLResponse:
    services = services_of(request)
    try:
        found = services.replayer.entry(dlq_id)
        envelope = decode_dlq_envelope(found.envelope)
        operation = services.store.get_operation(found.operation_id) if found.operation_id else None
        age = _ages(services)
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    summary = plan_summary(envelope)
    return render(
        request,
        "dlq_entry.html",
        title=f"DLQ entry {dlq_id}",
        section="dlq",
        live=LIVE_S,
        age=age,
        entry=found,
        envelope=envelope,
        operation=operation,
        plan_line=summary.line() if isinstance(summary, PlanSummary) else None,
        plan_problem=None if isinstance(summary, PlanSummary) else summary,
        headers=[f"{h.key}={header_text(h.value)}" for h in envelope.original_headers],
        attempts=[AttemptView.of_record(r) for r in envelope.attempts],
        folded=envelope.folded_attempts,
        key_text=utf8_or_none(envelope.original_key),
        key_hex=hex_lines(envelope.original_key),
        value_hex=hex_lines(envelope.original_value),
        value_size=len(envelope.original_value or b""),
    )


def _replay_consequences(ready: Replay | RequestReplay, services: ApiServices) -> list[str]:
    topics = services.settings.topics
    if isinstance(ready, RequestReplay):
        return [
            f"its ingest request is sent again to {topics.requests}: the planner plans it afresh",
            "the entry is marked REPLAYED, with your name and reason in its note",
        ]
    plan = PlanSummary.of(ready.plan)
    lines = [
        f"operation {plan.operation_id} goes back to {topics.plans} with its frozen plan "
        f"({ready.source} copy), trace {ready.trace_id}",
        f"the plan: {plan.line()}",
        "the entry is marked REPLAYED, with your name and reason in its note; if it fails "
        "again it comes back to this entry, its history extended",
    ]
    if ready.waits_for is not None:
        lines.append(
            f"the document has not reached revision {ready.waits_for} yet: the plan parks "
            "until it does"
        )
    return lines


def _purge_consequences(found: DlqEntry, stranded: tuple[Operation, ...]) -> list[str]:
    lines = [
        "the entry is RESOLVED with your reason: it is kept for audit and never replayed",
        f"operation {found.operation_id or '(none)'} stays where it is and never commits",
    ]
    if not stranded:
        return [*lines, "no later version of the document waits behind it"]
    waiting = ", ".join(f"{op.operation_id} ({op.stage})" for op in stranded)
    return [
        *lines,
        f"{len(stranded)} later version(s) wait behind it and would be stranded: {waiting}; "
        "a purge is refused unless you also move them to CONFLICT (the planner then replans "
        "the document's newest submission on its committed state)",
    ]


@router.get("/ui/dlq/{dlq_id}/{action}", name="console_confirm")
def confirm(request: Request, dlq_id: str, action: Action) -> HTMLResponse:
    """What ``action`` would do to the entry, as things stand, and the form that does it."""
    return _confirmation(request, dlq_id, action)


def _confirmation(
    request: Request,
    dlq_id: str,
    action: Action,
    *,
    problem: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """The confirmation page (again, with ``problem``, when the action was refused)."""
    services = services_of(request)
    refusal: str | None = None
    consequences: list[str] = []
    stranded: tuple[Operation, ...] = ()
    try:
        found = services.replayer.entry(dlq_id)
        if action == "replay":
            try:
                consequences = _replay_consequences(services.replayer.prepare(found), services)
            except DlqRefused as exc:
                refusal = exc.message
        else:
            stranded = stranded_by(services.store, dlq_id)
            consequences = _purge_consequences(found, stranded)
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    return render(
        request,
        "confirm.html",
        title=f"{action.capitalize()} DLQ entry {dlq_id}?",
        section="dlq",
        status_code=status_code,
        entry=found,
        action=action,
        consequences=consequences,
        refusal=refusal,
        stranded=stranded,
        problem=problem,
    )


@router.post("/ui/dlq/{dlq_id}/{action}", name="console_act")
async def act(request: Request, dlq_id: str, action: Action) -> Response:
    """Replay or purge the entry as the token's owner; back to the entry with what happened."""
    services = services_of(request)
    fields = await form_fields(request)
    reason = fields.get("reason", "").strip()
    try:
        who = require_cookie_token(request)
        if not reason:
            raise DlqRefused(f"a {action} needs a reason: it is kept for audit")
        done = _carry_out(
            services, dlq_id, action, who, reason, force=fields.get("force") == "true"
        )
    except (ApiError, DlqRefused) as exc:  # no token, or refused as things stand: say why there
        return _confirmation(
            request, dlq_id, action, problem=exc.message, status_code=http_status_of(exc.code)
        )
    except GraphIngestError as exc:
        return failure_page(request, exc, section="dlq")
    target = request.app.url_path_for("console_dlq_entry", dlq_id=dlq_id)
    return RedirectResponse(f"{target}?{urlencode({'notice': done})}", status_code=303)


def _carry_out(
    services: ApiServices, dlq_id: str, action: Action, who: str, reason: str, *, force: bool
) -> str:
    """Do it as the API does (one change at a time, audited); what happened, in a line."""
    if action == "replay":
        item = services.replay(dlq_id, force=False, by=who, reason=reason, via=IN_THE_CONSOLE)
        return f"replayed by {who}" + (f": {item.reason}" if item.reason else "")
    purged, _ = services.purge(dlq_id, force=force, by=who, reason=reason, via=IN_THE_CONSOLE)
    moved = ", ".join(op.operation_id for op in purged.followers)
    return f"purged by {who}" + (f"; moved to CONFLICT: {moved}" if moved else "")


__all__ = ["router"]
