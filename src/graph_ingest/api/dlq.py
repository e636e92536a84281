"""The DLQ API, as seed 002 §5.3 names it, over the DLQ services the CLI uses (``dlq.replayer``,
``dlq.purge``, the index ``store.dlq_index``) and the JSON they show (``dlq.views``).

Listing pages oldest first by (dead-lettered time, DLQ id) with an opaque cursor, like the index
itself; ``from``/``to`` bound that time, so a time range is a range of the keyset. Replay and
purge need a token (its name is recorded) and a reason, run one at a time and are audited
(``ApiServices.replay``/``purge``).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from graph_ingest.api.auth import Caller
from graph_ingest.api.dlq_models import (
    REASON,
    DlqEntryDetail,
    DlqEntryPage,
    DlqStatsView,
    PurgeAnswer,
    ReplayItemView,
    ReplayRequest,
)
from graph_ingest.api.params import Cursor, DlqId, Moment, OlderThan, aware, text_filter
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.dlq import views
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.queries import MAX_LIMIT, decode_cursor
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery

router = APIRouter(prefix="/api/v1/dlq", tags=["dlq"])

Services = Annotated[ApiServices, Depends(services_of)]

THROUGH_THE_API = "through the API"
"""Where a change was asked, as the entry's note and the audit say."""


def _cursor_of(entry: DlqEntry) -> str:
    raw = orjson.dumps([entry.dead_lettered_at.isoformat(), entry.dlq_id])
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _start_after(cursor: str | None, since: datetime | None) -> tuple[datetime, str] | None:
    """Where the keyset starts: after the cursor's entry, and not before ``since`` (every
    (time, id) at or after ``since`` is above (since, ""), as DLQ ids are never empty)."""
    starts = [decode_cursor(cursor)] if cursor is not None else []
    if since is not None:
        starts.append((since, ""))
    return max(starts, default=None)


@router.get("/messages", response_model=DlqEntryPage)
def messages(
    services: Services,
    status: Annotated[DlqStatus | None, Query(description="only entries in this status")] = None,
    code: Annotated[
        StatusCode | None, Query(description="only entries whose last failure has this code")
    ] = None,
    error_class: Annotated[
        str | None,
        text_filter("only entries whose last failure was this exception class", alias="class"),
    ] = None,
    space: Annotated[str | None, text_filter("only entries of documents in this space")] = None,
    document: Annotated[str | None, text_filter("only entries of this document id")] = None,
    since: Annotated[
        Moment | None, Query(alias="from", description="dead-lettered at or after this time")
    ] = None,
    until: Annotated[
        Moment | None, Query(alias="to", description="dead-lettered before this time")
    ] = None,
    older_than: OlderThan = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries per page")] = 50,
) -> JSONResponse:
    """The DLQ entries the filters select, oldest first, one page at a time (``class`` is the
    exception class of the last failure; ``from``/``to`` a time range with a timezone)."""
    query = DlqQuery(
        status=status,
        code=code,
        error_class=error_class,
        space=space,
        document_id=document,
        older_than_s=older_than,
        limit=limit + 1,
        after=_start_after(cursor, aware(since, "from")),
    )
    end = aware(until, "to")
    found = services.store.list_dlq_entries(query)
    in_range = [e for e in found if end is None or e.dead_lettered_at < end]
    page = in_range[:limit]
    more = len(in_range) > limit
    now = services.store.database_time()
    requests = services.settings.topics.requests
    return JSONResponse(
        {
            "entries": [views.entry_json(entry, now, requests_topic=requests) for entry in page],
            "next_cursor": _cursor_of(page[-1]) if more else None,
        }
    )


@router.get("/messages/{dlq_id}", response_model=DlqEntryDetail)
def message(dlq_id: DlqId, services: Services) -> JSONResponse:
    """One entry in full: its plan's summary (or, for a request that failed planning, the
    request's), the original message and every attempt."""
    entry = services.replayer.entry(dlq_id)
    envelope = decode_dlq_envelope(entry.envelope)
    operation = services.store.get_operation(entry.operation_id) if entry.operation_id else None
    now = services.store.database_time()
    requests = services.settings.topics.requests
    return JSONResponse(views.show_json(entry, envelope, operation, now, requests_topic=requests))


@router.post("/messages/{dlq_id}/replay", response_model=ReplayItemView)
def replay(dlq_id: DlqId, body: ReplayRequest, caller: Caller, services: Services) -> JSONResponse:
    """Publish the entry's frozen plan again (a planning entry: its request) and mark it
    REPLAYED; audited. 409 when it cannot be replayed as things stand (the message says why and
    what to do); ``force`` replays one already REPLAYED or RESOLVED."""
    item = services.replay(
        dlq_id, force=body.force, by=caller, reason=body.reason, via=THROUGH_THE_API
    )
    return JSONResponse(views.replay_item_json(item))


@router.delete("/messages/{dlq_id}", response_model=PurgeAnswer)
def purge_message(
    dlq_id: DlqId,
    caller: Caller,
    services: Services,
    reason: Annotated[
        str | None,
        Query(**{**REASON, "description": "why (required: kept with the entry and in the audit)"}),
    ] = None,
    force: Annotated[
        bool,
        Query(description="purge it although later versions wait behind it: they go to CONFLICT"),
    ] = False,
) -> JSONResponse:
    """Resolve the entry for good (kept for audit, never replayed); audited. 422 without a
    ``reason``; 409, naming them, when later versions of its document wait behind its
    operation, unless ``force=true``."""
    purged, note = services.purge(
        dlq_id, force=force, by=caller, reason=reason, via=THROUGH_THE_API
    )
    now = services.store.database_time()
    return JSONResponse(views.purge_json(purged, note, now))


@router.get("/stats", response_model=DlqStatsView)
def stats(services: Services) -> JSONResponse:
    """How many entries per status and per code, and how long the oldest pending one waits."""
    return JSONResponse(views.stats_json(services.store.dlq_stats()))


__all__ = ["router"]
