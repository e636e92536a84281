"""The demo's flow on the test stack (its own topics, schema, group and graph label)."""

from __future__ import annotations

import pytest

from graph_ingest.demo.corpus import DOCUMENTS, DROPPED_RELATION, UNCHANGED, UPDATED
from graph_ingest.demo.run import demo_flow, report
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from tests.integration.pipeline import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_demo_ends_where_it_says(pipeline: Pipeline) -> None:
    printed: list[str] = []
    settings = pipeline.real_planner_settings()

    result = demo_flow(settings, printed.append, space="demo_test")
    report(result, printed.append)

    # every submission completed, as the kind of plan it had to be
    outcomes = [
        (o.expected.request.document_id, o.kind, o.followed.operation.stage)
        for o in result.outcomes
        if o.followed.operation
    ]
    assert outcomes == [
        *((d, PlanKind.INGESTION, Stage.COMPLETED) for d in DOCUMENTS),
        (UPDATED, PlanKind.INGESTION, Stage.COMPLETED),
        (UNCHANGED, PlanKind.NO_OP, Stage.COMPLETED),
        ("project-beacon", PlanKind.RETRACTION, Stage.COMPLETED),
    ]
    # the update's dropped relation and the retracted document's own node are gone
    assert DROPPED_RELATION not in result.relations
    names = {name for _, name in result.nodes}
    assert "Project Beacon" not in names and {"Dan Okafor", "Feature Flags"} <= names
    assert ("Payments Team", "OWNS", "Ledger Service") in result.relations
    assert result.ok and not any("BAD" in line for line in printed)
    # and the graph is the one the documents left in this test's label
    nodes, edges = pipeline.graph_elements()
    assert (len(nodes), len(edges)) == (len(result.nodes), len(result.relations))
