"""A dependency outage is not poison: the applier waits it out and then finishes, nothing failed."""

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.stack.manager import LocalStack
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1, planned_elements

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(240)]


@pytest.mark.parametrize("service", ["neo4j", "postgres"])
def test_applier_retries_in_place_through_an_outage(
    service: str, pipeline: Pipeline, local_stack: LocalStack
) -> None:
    # Given a running applier that has already applied one plan (connections are warm)
    pipeline.start_applier()
    first = doc_v1(pipeline, "doc-before")
    pipeline.publish(first)
    pipeline.wait_stage(first.operation_id, Stage.COMPLETED)
    # When the service crashes and a plan arrives meanwhile
    local_stack.stop_service(service, hard=True)
    try:
        plan = doc_v1(pipeline, "doc-during")
        pipeline.publish(plan)
        # the applier keeps retrying (observed through its in-place retries), failing nothing
        wait_until(lambda: pipeline.retries_logged() >= 2, timeout_s=60, what="in-place retries")
    finally:
        local_stack.start_service(service)
    # Then, once the service is back, the plan completes exactly once, with no error recorded
    operation = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=120)
    assert operation.attempts == 0
    assert Stage.FAILED not in operation.stage_times
    assert pipeline.graph_elements() == planned_elements(first, plan)
    assert pipeline.sql("SELECT count(*) FROM failure_attempts") == [(0,)]
