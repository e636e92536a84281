"""The planner's metrics, on an injectable prometheus_client registry.

The planner does not count anything itself: its ``on_issues`` hook does
(``PlanningMetrics.record_issues``), as ``build_planner`` wires it. The planner process's
``observability.metrics.PipelineMetrics`` holds the one instance, on the process's registry.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter

from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.request import IngestRequest

KNOWN_ISSUE_CODES = (
    "MALFORMED_OUTPUT",
    "QUOTE_NOT_IN_CHUNK",
    "UNRESOLVED_ENDPOINT",
    "MISSING_PROPERTY",
    "UNKNOWN_PROPERTY",
    "PROPERTY_TYPE",
    "PROPERTY_NOT_IN_ENUM",
    "UNKNOWN_NODE_TYPE",
    "NAME_TOO_LONG",
    "EMPTY_NAME",
    "PRONOUN_NAME",
    "UNKNOWN_RELATION_TYPE",
    "ENDPOINT_TYPE_NOT_ALLOWED",
    "UNKNOWN_ENDPOINT",
    "LOW_CONFIDENCE",
    "NO_EVIDENCE",
    "UNKNOWN_CHUNK",
)
"""The issue codes the built-in extractors and the validator record (``llm_output``, ``rules``,
``validation``), exported at 0 from the start; an extractor's own codes appear when first seen."""


class PlanningMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.extraction_issues = Counter(
            "graph_ingest_planner_extraction_issues_total",
            "Extraction issues recorded while planning (candidates dropped, model output "
            "unusable), by issue code",
            ["code"],
            registry=registry,
        )
        for code in KNOWN_ISSUE_CODES:
            self.extraction_issues.labels(code=code)

    def record_issues(self, request: IngestRequest, issues: Sequence[ExtractionIssue]) -> None:
        """The planner's ``on_issues`` hook."""
        for issue in issues:
            self.extraction_issues.labels(code=issue.code).inc()


__all__ = ["KNOWN_ISSUE_CODES", "PlanningMetrics"]
