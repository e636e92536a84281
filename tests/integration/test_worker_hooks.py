"""Lifecycle hooks on real workers: a subscriber of a real applier run sees its partitions
assigned, the plans consumed, the batches' outcomes and the commits; and a revocation when a
second applier joins its group."""

from __future__ import annotations

import threading

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.hooks import (
    BatchHandled,
    Committed,
    Consumed,
    LoopSubscriber,
    Rebalanced,
)
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_applier
from tests.integration.pipeline import Pipeline
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ALICE = Entity("Person", "Alice")
ACME = Entity("Company", "Acme")


class Recorder(LoopSubscriber):
    """Keeps what the loops of one applier fire (the plans topic's and the retry tiers'): the
    loops' threads add, the test reads."""

    def __init__(self) -> None:
        self.consumed_messages = 0
        self.outcomes: dict[tuple[str, int, int], str] = {}
        self.committed_offsets: dict[tuple[str, int], int] = {}
        self.assigned: set[tuple[str, int]] = set()
        self.revoked: set[tuple[str, int]] = set()

    def consumed(self, event: Consumed) -> None:
        self.consumed_messages += event.messages

    def batch_handled(self, event: BatchHandled) -> None:
        assert event.duration_s >= 0 and event.attempts >= 1
        self.outcomes.update(event.outcomes)

    def committed(self, event: Committed) -> None:
        self.committed_offsets.update(event.offsets)

    def rebalanced(self, event: Rebalanced) -> None:
        self.assigned |= event.assigned
        self.revoked |= event.revoked


def start(pipeline: Pipeline, stop: threading.Event, recorder: Recorder) -> threading.Thread:
    thread = threading.Thread(
        target=run_applier,
        args=(pipeline.settings, stop),
        kwargs={"relay": False, "subscribers": [recorder]},
        daemon=True,
    )
    thread.start()
    return thread


def test_a_subscriber_sees_a_real_applier_consume_apply_commit_and_rebalance(
    pipeline: Pipeline,
) -> None:
    # Given an applier whose hooks a recorder subscribes to
    first, stop = Recorder(), threading.Event()
    threads = [start(pipeline, stop, first)]
    try:
        plans_topic = pipeline.settings.topics.plans
        wait_until(lambda: {(plans_topic, p) for p in range(3)} <= first.assigned, timeout_s=60)
        plans = [
            sample_plan(
                "it",
                f"doc-{i}",
                "Alice works at Acme.",
                [ALICE, ACME],
                [Relation(ALICE, "WORKS_AT", ACME)],
                graph=pipeline.graph,
            )
            for i in range(4)
        ]
        # When plans are published and applied
        pipeline.publish(*plans)
        for plan in plans:
            pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
        # Then the recorder saw each consumed, its batch's COMPLETED outcome, and the commits
        wait_until(lambda: sum(first.committed_offsets.values()) >= len(plans), timeout_s=30)
        assert first.consumed_messages == len(plans)
        assert sorted(first.outcomes.values()) == ["COMPLETED"] * len(plans)
        positions = {(topic, part) for topic, part, _ in first.outcomes}
        assert positions <= set(first.committed_offsets)
        for topic, part, offset in first.outcomes:
            assert first.committed_offsets[(topic, part)] > offset
        # When a second applier joins the group
        second = Recorder()
        threads.append(start(pipeline, stop, second))
        # Then the first gives up partitions the second is assigned
        wait_until(lambda: bool(first.revoked) and bool(second.assigned), timeout_s=60)
        assert first.revoked & second.assigned
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
