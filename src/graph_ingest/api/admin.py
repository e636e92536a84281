"""The admin API (seed 002 §7.3): force a dependency's circuit breaker for every worker of the
group, and see what is forced. Each change goes through ``dlq.breaker_admin.force_breaker``: a
record on the compacted control topic that every applier follows (they obey within seconds, and
one started later too), then an audit entry with the token's name and the reason.

``POST /admin/circuit-breaker/{dependency}/force-open|force-close|release`` takes its reason in
the body or the query (the body's wins); an unknown dependency is 404 naming the known ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from graph_ingest.api.auth import Caller
from graph_ingest.api.dlq_models import REASON
from graph_ingest.api.errors import ApiError
from graph_ingest.api.params import path_id
from graph_ingest.api.services import ApiServices, services_of
from graph_ingest.dlq.breaker_admin import force_breaker
from graph_ingest.domain.breaker_control import KNOWN_DEPENDENCIES, BreakerControl, BreakerMode
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.control import read_controls
from graph_ingest.producers.breaker_control import UnknownDependency

router = APIRouter(prefix="/admin/circuit-breaker", tags=["admin"])

Services = Annotated[ApiServices, Depends(services_of)]

Dependency = Annotated[
    str, path_id("the dependency whose breaker to force: " + ", ".join(KNOWN_DEPENDENCIES))
]
QueryReason = Annotated[str | None, Query(alias="reason", **REASON)]


class ForceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, **REASON)


class BreakerView(BaseModel):
    """A dependency's forced mode (AUTOMATIC when nobody forced it), who set it, when, why."""

    model_config = ConfigDict(extra="forbid")

    dependency: str
    mode: BreakerMode
    forced: bool
    by: str | None = None
    reason: str | None = None
    at: datetime | None = None

    @classmethod
    def of(cls, dependency: str, control: BreakerControl | None) -> BreakerView:
        if control is None:
            return cls(dependency=dependency, mode=BreakerMode.AUTOMATIC, forced=False)
        return cls(
            **control.model_dump(),
            forced=control.mode is not BreakerMode.AUTOMATIC,
        )


@router.get("", response_model=list[BreakerView])
def breakers(services: Services) -> list[BreakerView]:
    """Each known dependency's breaker as the operators forced it (the control topic read to
    its end now); AUTOMATIC when nobody did, or it was released."""
    controls = read_controls(services.settings, timeout_s=services.settings.api.ready_lag_timeout_s)
    return [BreakerView.of(name, controls.get(name)) for name in KNOWN_DEPENDENCIES]


def _force(
    services: ApiServices, dependency: str, mode: BreakerMode, by: str, reason: str | None
) -> BreakerView:
    try:
        control = force_breaker(
            services.settings, services.audit, dependency, mode, by=by, reason=reason or ""
        )
    except UnknownDependency as exc:
        raise ApiError(exc.message, code=StatusCode.NOT_FOUND) from exc
    return BreakerView.of(dependency, control)


def _route(mode: BreakerMode, action: str, summary: str) -> None:
    """``POST /admin/circuit-breaker/{dependency}/<action>``: set ``mode`` (token required)."""

    def change(
        dependency: Dependency,
        caller: Caller,
        services: Services,
        query_reason: QueryReason = None,
        body: ForceRequest | None = None,
    ) -> BreakerView:
        reason = body.reason if body is not None and body.reason else query_reason
        return _force(services, dependency, mode, caller, reason)

    router.post(
        f"/{{dependency}}/{action}",
        response_model=BreakerView,
        summary=summary,
        description=f"{summary}; audited with the token's name and the reason. 404 for a "
        "dependency no worker keeps a breaker for.",
        name=f"breaker_{action.replace('-', '_')}",
    )(change)


_route(BreakerMode.FORCED_OPEN, "force-open", "Force the breaker open: every applier pauses")
_route(
    BreakerMode.FORCED_CLOSED,
    "force-close",
    "Force the breaker closed: failures are retried, never pause the appliers",
)
_route(BreakerMode.AUTOMATIC, "release", "Hand the breaker back to the failures (automatic)")


__all__ = ["BreakerView", "router"]
