"""The operations and projections of the read side (``projections.queries``, ``lag_reader``):
``GET /api/v1/operations/{id}``, ``GET /api/v1/operations`` (filtered, cursor-paginated, newest
first) and ``GET /api/v1/projections``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from graph_ingest.api.errors import ApiError
from graph_ingest.api.params import Cursor, OlderThan, OperationId, text_filter
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import OperationStatus
from graph_ingest.projections.lag import ProjectionLag
from graph_ingest.projections.lag_reader import operations_lag
from graph_ingest.projections.queries import MAX_LIMIT, OperationFilter, OperationPage

router = APIRouter(prefix="/api/v1", tags=["operations"])

Services = Annotated[ApiServices, Depends(services_of)]


@router.get("/operations/{operation_id}", response_model=OperationStatus)
def operation(operation_id: OperationId, services: Services) -> OperationStatus:
    """One operation as the projection has folded it: its stage, attempts, last error, DLQ
    entry and every stage transition with its time."""
    found = services.queries.operation_status(operation_id)
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
