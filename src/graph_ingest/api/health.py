"""The API's own health: ``/health/live``, ``/health/ready`` and ``/health/startup``, JSON in the
workers' shape (``observability.probes.ProbeAnswer``), so ``graph-ingest check --url`` reads both.

* live: 200 whenever the event loop answers; never a dependency check (a database outage must
  not restart the API, which is the operator's window onto it).
* startup: 200 once the lifespan has opened the services (uvicorn serves nothing before that).
* ready, decided by :func:`readiness` (pure):

  ================================================  ===========  ======
  PostgreSQL and Kafka                               projection   answer
  ================================================  ===========  ======
  either unreachable                                 any          not_ready 503
  both reachable                                     stalled      degraded 200
  both reachable                                     otherwise    ready 200
  ================================================  ===========  ======

  A stalled projection still answers 200: reads are stale, not wrong, and the DLQ and the
  health of the pipeline are served from the write side; taking the API out of its Service
  would hide the very thing an operator needs then. The body says why.
"""

from __future__ import annotations

from dataclasses import asdict
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.observability.probes import ProbeAnswer
from graph_ingest.projections.lag import LagState, ProjectionLag
from graph_ingest.projections.lag_reader import operations_lag

router = APIRouter(prefix="/health", tags=["health"])

UP = "up"


def readiness(dependencies: dict[str, str], lag: ProjectionLag | None) -> ProbeAnswer:
    """``dependencies``: each backing service, ``up`` or why it is not; ``lag``: the operations
    projection's (None when it could not be read)."""
    down = {name: why for name, why in dependencies.items() if why != UP}
    body: dict[str, Any] = {
        "dependencies": dependencies,
        "projections": [] if lag is None else [asdict(lag)],
    }
    if down:
        reason = "; ".join(f"{name} unreachable: {why}" for name, why in down.items())
        return ProbeAnswer(
            HTTPStatus.SERVICE_UNAVAILABLE, {"status": "not_ready", "reason": reason, **body}
        )
    if lag is not None and lag.state is LagState.STALLED:
        reason = (
            f"projection {lag.projection} stalled {lag.offsets_behind} offsets behind: reads are"
            " stale (is `graph-ingest worker projector` running?)"
        )
        return ProbeAnswer(HTTPStatus.OK, {"status": "degraded", "reason": reason, **body})
    return ProbeAnswer(HTTPStatus.OK, {"status": "ready", "reason": "serving", **body})


def _check(services: ApiServices) -> tuple[dict[str, str], ProjectionLag | None]:
    """Ask PostgreSQL, then read the lag (PostgreSQL's positions and Kafka's ends)."""
    try:
        services.store.probe()
    except GraphIngestError as exc:
        return {"postgres": str(exc), "kafka": "not asked: PostgreSQL is down"}, None
    try:
        lag = operations_lag(
            services.settings, services.tables, timeout_s=services.settings.api.ready_lag_timeout_s
        )
    except GraphIngestError as exc:
        return {"postgres": UP, exc.dependency or "kafka": str(exc)}, None
    return {"postgres": UP, "kafka": UP}, lag


def _answer(answer: ProbeAnswer) -> JSONResponse:
    return JSONResponse(
        answer.body, status_code=answer.status, headers={"Cache-Control": "no-store"}
    )


@router.get("/live")
async def live() -> JSONResponse:
    return _answer(ProbeAnswer(HTTPStatus.OK, {"status": "live", "worker": "api"}))


@router.get("/startup")
async def startup(request: Request) -> JSONResponse:
    started = getattr(request.app.state, "services", None) is not None
    status = HTTPStatus.OK if started else HTTPStatus.SERVICE_UNAVAILABLE
    return _answer(
        ProbeAnswer(status, {"status": "started" if started else "starting", "worker": "api"})
    )


@router.get("/ready")
def ready(services: Annotated[ApiServices, Depends(services_of)]) -> JSONResponse:
    return _answer(readiness(*_check(services)))


__all__ = ["UP", "readiness", "router"]
