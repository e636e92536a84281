"""The planner's metrics, on an injectable prometheus_client registry.

The planner does not count anything itself: its ``on_issues`` hook does
(``PlanningMetrics.record_issues``), as ``build_planner`` wires it.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.request import IngestRequest


class PlanningMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.extraction_issues = Counter(
            "graph_ingest_planner_extraction_issues_total",
            "Extraction issues recorded while planning (candidates dropped, model output "
            "unusable), by issue code",
            ["code"],
            registry=registry,
        )

    def record_issues(self, request: IngestRequest, issues: Sequence[ExtractionIssue]) -> None:
        """The planner's ``on_issues`` hook."""
        for issue in issues:
            self.extraction_issues.labels(code=issue.code).inc()


_process_metrics: PlanningMetrics | None = None


def process_metrics() -> PlanningMetrics:
    """This process's planning metrics, on prometheus_client's default registry (created once:
    a registry takes each metric name once)."""
    global _process_metrics
    if _process_metrics is None:
        _process_metrics = PlanningMetrics(REGISTRY)
    return _process_metrics


__all__ = ["PlanningMetrics", "process_metrics"]
