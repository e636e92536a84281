"""The projector's lag and state as metrics, read at scrape time (a prometheus ``Collector``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_ingest.observability.families import PROJECTION_STATES, REBUILDING


class ProjectionMetrics(Collector):
    """The projector's lag and state, read at scrape time from ``lag`` (``LagForReadiness``:
    cached a few seconds, as readiness reads it): ``graph_ingest_projection_lag_seconds``,
    ``_lag_offsets`` of the live projection, and ``graph_ingest_projection_state{state}``, 1 for
    its state (``rebuilding`` 1 besides while a rebuild builds new tables). Nothing is exported
    but the state's zeros while the lag cannot be read."""

    def __init__(self, lag: Callable[[], Mapping[str, Any]]) -> None:
        self._lag = lag

    def collect(self) -> Iterable[Metric]:
        lags = self._lag().get("lag")
        entries = [e for e in lags if isinstance(e, Mapping)] if isinstance(lags, list) else []
        live = next((e for e in entries if e.get("state") != REBUILDING), None)
        rebuilding = any(e.get("state") == REBUILDING for e in entries)
        seconds = GaugeMetricFamily(
            "graph_ingest_projection_lag_seconds",
            "How long the oldest operation event not folded yet has waited (0: caught up)",
        )
        offsets = GaugeMetricFamily(
            "graph_ingest_projection_lag_offsets",
            "Operation events committed to the topic and not folded yet",
        )
        if live is not None:
            seconds.add_metric([], float(live["seconds_behind"]))
            offsets.add_metric([], float(live["offsets_behind"]))
        state = GaugeMetricFamily(
            "graph_ingest_projection_state",
            "1 for the operations projection's state (rebuilding: while a rebuild runs)",
            labels=["state"],
        )
        for name in PROJECTION_STATES:
            on = (live is not None and live.get("state") == name) or (
                name == REBUILDING and rebuilding
            )
            state.add_metric([name], 1.0 if on else 0.0)
        return [seconds, offsets, state]

    def close(self) -> None:
        """Nothing to release (the lag's reader is closed by its owner)."""


__all__ = ["ProjectionMetrics"]
