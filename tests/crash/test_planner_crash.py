"""SIGKILL a real planner process between publishing a plan and committing its request's offset:
its successor must leave exactly one committed plan for the request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.unit.requests import request

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]


def start(env: dict[str, str], marker: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "tests.crash.planner_process", str(marker), mode],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def uncommitted_plans(pipeline: Pipeline) -> int:
    """Plan messages on the topic, those of open or aborted transactions included."""
    topic = pipeline.settings.topics.plans
    consumer = Consumer(
        pipeline.settings.kafka.consumer_config(
            f"peek-{uuid.uuid4().hex}", **{"isolation.level": "read_uncommitted"}
        )
    )
    try:
        consumer.assign(
            [TopicPartition(topic, p, 0) for p in range(pipeline.settings.topics.plan_partitions)]
        )
        seen = 0

        def some() -> bool:
            nonlocal seen
            seen += sum(m.error() is None for m in consumer.consume(100, timeout=0.5))
            return seen > 0

        wait_until(some, timeout_s=30, interval_s=0, what="the uncommitted plan")
        return seen
    finally:
        consumer.close()


def test_a_planner_killed_before_its_commit_leaves_exactly_one_plan(
    pipeline: Pipeline, processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    env = {**os.environ, **pipeline.env(), "GRAPH_INGEST_PLANNER__WORKER_ID": "crash-planner"}
    with IngestProducer(pipeline.settings) as producer:
        submission_id = producer.submit(request("doc-1", content="Alice met Bob."))
    marker = tmp_path / "halted"
    log = tmp_path / "planner.log"
    # Given a planner halted with the plan written and its transaction open
    doomed = start(env, marker, "before-commit", log)
    processes.append(doomed)
    wait_until(lambda: marker.exists() or doomed.poll() is not None, timeout_s=90, what="the halt")
    assert marker.exists(), log.read_text()
    assert uncommitted_plans(pipeline) == 1
    assert read_to_end(pipeline.settings, pipeline.settings.topics.plans) == []
    # When it is SIGKILLed there and a planner with the same worker id takes over
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=30)
    processes.append(start(env, tmp_path / "unused", "none", log))

    # Then the request is planned again, and read_committed sees exactly one plan for it
    # (the submission row was written before the first commit: it cannot tell)
    plans = wait_until(
        lambda: read_to_end(pipeline.settings, pipeline.settings.topics.plans),
        timeout_s=120,
        what="a committed plan",
    )
    assert [key for key, _, _ in plans] == [b"unit/doc-1"]
    ((_, value, headers),) = plans
    assert headers[kafka_headers.SUBMISSION_ID].decode() == submission_id
    submission = pipeline.store.get_submission(submission_id)
    assert submission is not None and submission.operation_id == decode_plan(value).operation_id
    # and the request's offset is committed with it
    group = Consumer(pipeline.settings.kafka.consumer_config(pipeline.settings.planner.group_id))
    try:
        listed = [
            TopicPartition(pipeline.settings.topics.requests, p)
            for p in range(pipeline.settings.topics.request_partitions)
        ]
        committed = {tp.partition: tp.offset for tp in group.committed(listed, timeout=30)}
    finally:
        group.close()
    assert committed[submission.source[1]] == submission.source[2] + 1
