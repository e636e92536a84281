"""The console's workers page: each worker's degradation level, why, which breakers are not
closed and since when (the read table ``worker_degradation``), and each dependency's breaker
mode as operators forced it, with who, why and when (the control topic ``ingestion.control``,
read to its end). Read-only: a breaker is forced with ``graph-ingest breaker``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from graph_ingest.api.console.pages import failure_page, render
from graph_ingest.api.services import services_of
from graph_ingest.domain.breaker_control import KNOWN_DEPENDENCIES, BreakerControl, BreakerMode
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.kafka.control import read_controls
from graph_ingest.projections.degradation_rows import worker_degradations

router = APIRouter(include_in_schema=False)

LIVE_S = 5
CONTROLS_TIMEOUT_S = 10.0
"""How long the page waits for the control topic's end: a slow Kafka is said on the page, and
the workers' degradation (from PostgreSQL) is shown all the same."""


@dataclass(frozen=True, slots=True)
class DependencyMode:
    """One dependency's breaker as the operators left it (AUTOMATIC, no one: never forced)."""

    dependency: str
    mode: BreakerMode
    control: BreakerControl | None


def dependency_modes(controls: Mapping[str, BreakerControl]) -> list[DependencyMode]:
    """Every known dependency (and any other the topic names), forced or not, by name."""
    names = sorted({*KNOWN_DEPENDENCIES, *controls})
    return [
        DependencyMode(
            name,
            controls[name].mode if name in controls else BreakerMode.AUTOMATIC,
            controls.get(name),
        )
        for name in names
    ]


@router.get("/ui/workers", name="console_workers")
def workers(request: Request) -> HTMLResponse:
    services = services_of(request)
    try:
        degradations = worker_degradations(services.tables)
    except GraphIngestError as exc:
        return failure_page(request, exc, section="workers")
    problem = None
    try:
        modes = dependency_modes(read_controls(services.settings, timeout_s=CONTROLS_TIMEOUT_S))
    except GraphIngestError as exc:  # Kafka out of reach: the degradations still stand
        modes = None
        problem = f"the forced breaker modes are unknown: {exc.code}: {exc}"
    return render(
        request,
        "workers.html",
        title="Workers",
        section="workers",
        live=LIVE_S,
        workers=degradations,
        modes=modes,
        control_topic=services.settings.topics.control,
        problem=problem,
    )


__all__ = ["DependencyMode", "dependency_modes", "router"]
