"""A dependency outage is not poison (issue 6 item 5): the applier pauses behind the circuit
breaker, routes nothing to a tier or the DLQ, reports its degradation, and finishes every plan."""

import threading
import time

import pytest

from graph_ingest.domain.degradation import DegradationLevel
from graph_ingest.domain.operation import OutageWait
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas.codec import decode_degradation_event
from graph_ingest.stack.manager import LocalStack
from graph_ingest.waiting import wait_until
from tests.integration.conftest import PipelineFactory
from tests.integration.test_applier import doc_v1, planned_elements
from tests.kafka_messages import read_to_end

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(420)]

OUTAGE_S = 60.0
PLANS = 500
STABLE_S = 5.0  # degradation_stable_s: how long every breaker stays closed before L0


@pytest.mark.parametrize("service", ["neo4j", "postgres"])
def test_an_outage_pauses_behind_the_breaker_routes_nothing_and_every_plan_completes(
    service: str, pipeline_factory: PipelineFactory, local_stack: LocalStack
) -> None:
    pipeline = pipeline_factory(degradation_stable_s=STABLE_S)
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(PLANS)]
    pipeline.start_applier()
    pipeline.publish(plans[0])
    pipeline.wait_stage(plans[0].operation_id, Stage.COMPLETED)
    # Given plans flowing steadily through the whole outage and after it
    chunks = [plans[i : i + 10] for i in range(1, PLANS, 10)]
    pace_s = OUTAGE_S * 1.3 / len(chunks)

    def publish_steadily() -> None:
        for chunk in chunks:
            pipeline.publish(*chunk)
            time.sleep(pace_s)

    publisher = threading.Thread(target=publish_steadily, daemon=True)
    publisher.start()
    # When the service crashes for a minute, once the steady flow has begun to complete
    pipeline.wait_stage(chunks[0][-1].operation_id, Stage.COMPLETED)
    local_stack.stop_service(service, hard=True)
    try:
        time.sleep(OUTAGE_S)
    finally:
        local_stack.start_service(service)
    publisher.join(timeout=120)
    # Then every plan completes exactly once, none with an error recorded, the graph is exact
    held: list[OutageWait] = []
    for plan in plans:
        done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED, timeout_s=180)
        assert done.attempts == 0, done
        held.extend(done.waits)
    # and the plans held through it record the wait: the outage leaves its trace
    assert held and {wait.dependency for wait in held} == {service}
    assert all(wait.started_at < wait.ended_at for wait in held)
    assert pipeline.graph_elements() == planned_elements(*plans)
    # and nothing went to a tier or the DLQ because of the outage
    assert pipeline.sql("SELECT count(*) FROM failure_attempts") == [(0,)]
    assert pipeline.sql("SELECT count(*) FROM dlq_entries") == [(0,)]
    for topic, _ in pipeline.settings.topics.retry_tiers:
        assert read_to_end(pipeline.settings, topic) == []
    # and the worker reported L1 (the breaker open) and, once it had stayed closed, L0
    events = wait_until(
        lambda: (
            found
            if len(
                found := [
                    decode_degradation_event(value)
                    for _, value, _ in read_to_end(
                        pipeline.settings, pipeline.settings.topics.degradation
                    )
                ]
            )
            >= 2
            else None
        ),
        timeout_s=STABLE_S + 30,
        what="the degradation events",
    )
    assert [(e.previous_level, e.level) for e in events] == [
        (DegradationLevel.L0, DegradationLevel.L1),
        (DegradationLevel.L1, DegradationLevel.L0),
    ]
    assert service in events[0].reason
    assert (events[1].at - events[0].at).total_seconds() >= STABLE_S
