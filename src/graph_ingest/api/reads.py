"""Documents and failures as the read tables hold them: ``GET /api/v1/documents/{space}/{id}``
(``projections.documents``) and ``GET /api/v1/errors/report?from=&to=``
(``projections.errors_report``), each answering the very JSON of the CLI's ``doc show --json``
and ``errors report --json``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from graph_ingest.api.errors import ApiError
from graph_ingest.api.params import Moment, path_id
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.document_fold import DocumentView
from graph_ingest.projections.errors_report import report_json

router = APIRouter(prefix="/api/v1")

Services = Annotated[ApiServices, Depends(services_of)]


class ErrorGroupView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    error_class: str
    failures: int
    operations: int = Field(description="distinct operations these failures hit")
    first_seen: datetime
    last_seen: datetime
    example_operation_ids: list[str]


class ErrorsReportView(BaseModel):
    """Every failure in ``[from, to)`` grouped by code and error class, most failures first."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    failures: int
    groups: list[ErrorGroupView]


def _json(value: object) -> Response:
    """``value`` as the CLI prints it (orjson: dataclasses, times in ISO 8601)."""
    return Response(orjson.dumps(value), media_type="application/json")


@router.get("/documents/{space}/{document_id}", tags=["documents"], response_model=DocumentView)
def document(
    space: Annotated[str, path_id("the document's space")],
    document_id: Annotated[str, path_id("the document's id")],
    services: Services,
) -> Response:
    """One document: its current revision and version (what its last COMPLETED operation that
    changes state made it) and every operation of it, oldest first, with its stage."""
    view = services.documents.document_view(space, document_id)
    if view is None:
        raise ApiError(
            f"document {space}/{document_id} not found: no operation of it was seen (is the "
            "projector running? GET /api/v1/projections shows how far it has folded)",
            code=StatusCode.NOT_FOUND,
        )
    return _json(view)


@router.get("/errors/report", tags=["errors"], response_model=ErrorsReportView)
def errors_report(
    services: Services,
    start: Annotated[Moment, Query(alias="from", description="from, with a timezone")],
    end: Annotated[Moment, Query(alias="to", description="up to, not included")],
) -> Response:
    """Every failure between ``from`` and ``to`` (a failed attempt, a dead-lettering or a
    conflict, each counted once; a parking is none) grouped by code and error class: counts, the
    operations hit, first and last seen, up to 5 example operation ids. 400 for a range that is
    empty, backwards, or without timezones."""
    return _json(report_json(services.errors.report(start, end)))


__all__ = ["router"]
