"""The operations and projections of the read side (``projections.queries``, ``lag_reader``):
``GET /api/v1/operations/{id}`` (``?wait=5s``: read your writes, at most ``MAX_WAIT_S``),
``GET /api/v1/operations`` (filtered, cursor-paginated, newest first) and
``GET /api/v1/projections``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from graph_ingest.api.errors import ApiError
from graph_ingest.api.params import Cursor, OlderThan, OperationId, text_filter
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.domain.durations import parse_duration
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus
from graph_ingest.projections.lag import ProjectionLag
from graph_ingest.projections.lag_reader import operations_lag
from graph_ingest.projections.queries import MAX_LIMIT, OperationFilter, OperationPage

router = APIRouter(prefix="/api/v1", tags=["operations"])

Services = Annotated[ApiServices, Depends(services_of)]


MAX_WAIT_S = 30.0
"""The longest ``?wait=`` waits: a longer one is cut to it (the header says if it was enough)."""
CURRENT_HEADER = "Projection-Current"

Wait = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9]{1,9}(\.[0-9]{1,3})?(ms|s)?$",
        description="read your writes: wait (at most 30 s) until the projection has seen the "
        "newest change the pipeline committed for it, e.g. 5s, 500ms, or 5 (seconds); the "
        f"{CURRENT_HEADER} header says whether it had",
    ),
]


@router.get(
    "/operations/{operation_id}",
    response_model=OperationStatus,
    responses={
        200: {
            "headers": {
                CURRENT_HEADER: {
                    "description": "with ?wait=: true when the answer is the newest the "
                    "pipeline committed, false when the wait ran out first",
                    "schema": {"type": "string", "enum": ["true", "false"]},
                }
            }
        }
    },
)
def operation(
    operation_id: OperationId, services: Services, response: Response, wait: Wait = None
) -> OperationStatus:
    """One operation as the projection has folded it: its stage, attempts, last error, DLQ
    entry and every stage transition with its time. With ``wait``: once the projection has
    caught up with it (or the wait ran out: the ``Projection-Current`` header says which)."""
    if wait is None:
        found = services.queries.operation_status(operation_id)
    else:
        timeout_s = min(parse_duration(wait), MAX_WAIT_S)
        seen = services.queries.wait_until_projected(operation_id, timeout_s)
        response.headers[CURRENT_HEADER] = str(seen.current).lower()
        found = seen.status
    if found is None:
        raise ApiError(
            f"no operation {operation_id} in the read tables (not submitted, or the projector"
            " has not folded it yet: GET /api/v1/projections shows its lag)",
            code=StatusCode.NOT_FOUND,
        )
    return found


@router.get("/operations", response_model=OperationPage)
def operations(
    services: Services,
    stage: Annotated[Stage | None, Query(description="only operations in this stage")] = None,
    space: Annotated[str | None, text_filter("only operations of this space")] = None,
    document: Annotated[str | None, text_filter("only operations of this document id")] = None,
    error_code: Annotated[
        StatusCode | None, Query(description="only operations whose last error has this code")
    ] = None,
    older_than: OlderThan = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="operations per page")] = 50,
) -> OperationPage:
    """The operations the filters select, newest change first, one page at a time: pass
    ``next_cursor`` back as ``cursor`` for the next page (null on the last one)."""
    where = OperationFilter(
        stage=stage,
        space=space,
        document=document,
        error_code=error_code,
        older_than=None
        if older_than is None
        else datetime.now(UTC) - timedelta(seconds=older_than),
    )
    return services.queries.list_operations(where, limit=limit, cursor=cursor)


@router.get("/projections", response_model=list[ProjectionLag], tags=["projections"])
def projections(services: Services) -> list[ProjectionLag]:
    """Each projection's lag (offsets and seconds behind, the age of its last event) and state
    (idle, catching_up, stalled)."""
    settings = services.settings
    return [operations_lag(settings, services.tables, timeout_s=settings.api.ready_lag_timeout_s)]


__all__ = ["router"]
