"""What the planner worker needs of a planner: plan one request (its plan and the extraction
issues recorded on the way), forget documents it gave away, open and release what it holds.

``graph_ingest.planning.planner.Planner`` implements it (``wiring.build_planner``
builds one from settings); the worker only knows this protocol, so
another planner can be plugged in (``PLANNER__FACTORY``, ``worker planner --planner``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Protocol, cast

from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.request import IngestRequest
from graph_ingest.planning.metrics import PlanningMetrics
from graph_ingest.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """What planning one request made: its frozen plan, and the extraction issues recorded
    instead of failing it (candidates dropped by validation, model output that was unusable).
    The worker records them with the submission, where ``status`` shows them."""

    plan: IngestionPlan
    issues: tuple[ExtractionIssue, ...] = ()


class RequestPlanner(Protocol):
    def start(self) -> None:
        """Open what the planner owns (its store connections); the worker calls it first."""
        ...

    def close(self) -> None:
        """Release what ``start`` opened and any client made since (the model endpoint's); the
        worker calls it when it stops."""
        ...

    def plan_request(self, request: IngestRequest) -> PlannedRequest:
        """The frozen plan of ``request`` and its extraction issues; the plan is built on the
        latest state *planned* for its document (the committed one when this planner has planned
        none since). Raises PlanningError (permanent: the request goes to the DLQ) or
        ExtractionFailed with a transient code (retried with backoff, honouring
        ``retry_after_s``)."""
        ...

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop what was planned for these (space, document_id): their partitions were revoked,
        or the plans made for them were not published (an aborted transaction). The next plan
        of such a document starts from its committed state."""
        ...


PlannerFactory = Callable[[Settings], RequestPlanner]

_MOVED_FACTORIES = {
    "graph_ingest.consumers.wiring:build_planner": "graph_ingest.wiring:build_planner"
}
"""Factory paths of earlier releases, still accepted (the composition root moved in issue 17)."""


def build_counting(
    build: PlannerFactory, settings: Settings, metrics: PlanningMetrics | None
) -> RequestPlanner:
    """``build(settings)``, handing it ``metrics`` to count extraction issues on when it takes a
    ``metrics`` keyword (``wiring.build_planner`` does; a factory of one's own need not)."""
    if metrics is not None and "metrics" in inspect.signature(build).parameters:
        return cast(Callable[..., RequestPlanner], build)(settings, metrics=metrics)
    return build(settings)


def load_planner_factory(path: str) -> PlannerFactory:
    """``module:function`` -> the function, which builds a planner from settings."""
    if path in _MOVED_FACTORIES:
        log.warning(
            "planner factory %s moved to %s; update the setting", path, _MOVED_FACTORIES[path]
        )
        path = _MOVED_FACTORIES[path]
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise ConfigurationError(f"planner factory {path!r}: expected module:function")
    try:
        factory = getattr(import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"planner factory {path!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise ConfigurationError(f"planner factory {path!r} is not callable")
    return cast(PlannerFactory, factory)


__all__ = [
    "PlannedRequest",
    "PlannerFactory",
    "RequestPlanner",
    "build_counting",
    "load_planner_factory",
]
