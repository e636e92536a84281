"""A PostgreSQL outage while a replan is pending (issue 16 item 3): the planner process waits it
out, holding the replan's partition, and plans the replan once PostgreSQL is back."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from graph_ingest.kafka.errors import KafkaIngestError
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.request_messages import submission_id_of
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.submissions import ReplanOutcome
from graph_ingest.waiting import WaitTimeout, wait_until
from tests.crash.test_planner_crash import start
from tests.integration.pipeline import Pipeline
from tests.integration.test_planner_worker import produce_requests, wait_submission
from tests.kafka_messages import read_to_end
from tests.processes import dump_stacks
from tests.unit.requests import request
from tests.worker_logs import start_worker

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(300)]

OUTAGE_S = 30.0
TRANSACTION_TIMEOUT_S = 10.0
GIVE_UP_S = TRANSACTION_TIMEOUT_S + 15.0
"""From the broker's stop: its timeout, the grace past it (kafka.transactional.CALL_GRACE_S) and
the broker's own shutdown; under the outage's length."""


def test_a_postgresql_outage_during_a_replan_is_waited_out_and_the_replan_completes(
    pipeline: Pipeline,
    local_stack: LocalStack,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    env = {**os.environ, **pipeline.env(), "GRAPH_INGEST_PLANNER__WORKER_ID": "outage-planner"}
    marker = tmp_path / "met-the-outage"
    log = tmp_path / "planner.log"
    planner = start(env, marker, "store-outage", log)
    processes.append(planner)
    # Given a request planned by the planner process
    (submission_id,) = produce_requests(pipeline, {"doc-1": {}}).values()
    conflicted = wait_submission(pipeline, submission_id, timeout_s=90).operation_id
    assert conflicted is not None

    # When PostgreSQL is down as the request comes back for a replan (as the conflict watcher
    # re-submits it) and the planner has met the outage
    local_stack.stop_service("postgres", hard=True)
    try:
        replan = {kafka_headers.REPLAN_OF: conflicted.encode(), kafka_headers.REPLAN_ATTEMPT: b"1"}
        produce_requests(pipeline, {"doc-1": replan})
        wait_until(
            lambda: marker.exists() or planner.poll() is not None,
            timeout_s=120,
            what="the planner to meet the outage",
        )
    finally:
        local_stack.start_service("postgres")

    # Then the planner process is still running, and plans the replan on PostgreSQL's return
    def replan_outcome() -> list[tuple[str, str]]:
        return pipeline.sql(
            "SELECT outcome, submission_id FROM ingest_replans WHERE operation_id = %s", conflicted
        )

    wait_until(
        lambda: replan_outcome() or planner.poll() is not None, timeout_s=120, what="the replan"
    )
    assert planner.poll() is None, log.read_text()[-3000:]
    assert replan_outcome() == [(ReplanOutcome.REPLANNED.value, submission_id)]


def test_the_planner_recovers_from_a_broker_outage_in_the_middle_of_its_transactions(
    pipeline: Pipeline,
    local_stack: LocalStack,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    log = tmp_path / "planner.log"
    planner = start_worker(
        pipeline,
        "planner",
        "outage-planner",
        log,
        command=("--planner", "tests.planners:build"),
        # SIGABRT dumps every thread's stack into the log (see dump_stacks)
        env={
            "PYTHONFAULTHANDLER": "1",
            "GRAPH_INGEST_PLANNER__TRANSACTION_TIMEOUT_S": str(TRANSACTION_TIMEOUT_S),
        },
    )
    processes.append(planner)
    (first,) = submit(pipeline, "doc-first")
    wait_until(lambda: first in planned(pipeline), timeout_s=90, what="the first plan")

    # Given requests flowing to the planner, one at a time, as the broker stops for 30 s
    feeder = Feeder(pipeline)
    feeder.start()
    wait_until(lambda: len(feeder.acknowledged) >= 5, timeout_s=60, what="requests flowing")
    logged = log.stat().st_size
    local_stack.stop_service("kafka")
    outage_ends = time.monotonic() + OUTAGE_S
    try:
        # Then, Kafka still away, the planner gives the transaction it was in up within its
        # timeout (and a grace), and says so: it does not wait for the lost coordinator
        if not given_up(log, logged, timeout_s=GIVE_UP_S):
            raise AssertionError(dump_stacks(planner, log))  # where it waits, Kafka still away
        time.sleep(max(0.0, outage_ends - time.monotonic()))  # the rest of the outage
    finally:
        local_stack.start_service("kafka")
        feeder.stop()

    # and when a request is sent after the broker's return, the planner plans it
    (after,) = submit(pipeline, "doc-after")
    try:
        wait_until(lambda: after in planned(pipeline), timeout_s=120, what="the plan of doc-after")
    except WaitTimeout:
        raise AssertionError(dump_stacks(planner, log)) from None
    assert planner.poll() is None, log.read_text()[-3000:]
    # and every request acknowledged before it is planned exactly once, none of the others
    # (their acknowledgement lost in the outage) more than once
    plans = planned(pipeline)
    acknowledged = {first, *feeder.acknowledged, after}
    assert {s: n for s, n in plans.items() if n > 1} == {}
    assert acknowledged - plans.keys() == set()
    assert plans.keys() - acknowledged <= feeder.unsure


class Feeder(threading.Thread):
    """Submits one request after another until stopped (or until one is not acknowledged: the
    broker is away), noting which ones were acknowledged."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__(name="feeder", daemon=True)
        self._pipeline = pipeline
        self._halt = threading.Event()
        self.acknowledged: list[str] = []
        self.unsure: set[str] = set()

    def run(self) -> None:
        with IngestProducer(self._pipeline.settings) as producer:
            for n in itertools.count():
                if self._halt.is_set():
                    return
                built = request(f"doc-{n}", content="Alice met Bob.")
                try:
                    self.acknowledged.append(producer.submit(built))
                except KafkaIngestError:
                    self.unsure.add(submission_id_of(built))
                    return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=120)


def submit(pipeline: Pipeline, *document_ids: str) -> list[str]:
    with IngestProducer(pipeline.settings) as producer:
        return [
            s.submission_id
            for s in producer.submit_many(
                [request(d, content="Alice met Bob.") for d in document_ids]
            )
        ]


def planned(pipeline: Pipeline) -> Counter[str]:
    """How many committed plans there are for each submission id."""
    plans = read_to_end(pipeline.settings, pipeline.settings.topics.plans)
    return Counter(headers[kafka_headers.SUBMISSION_ID].decode() for _, _, headers in plans)


def given_up(log: Path, logged: int, *, timeout_s: float) -> bool:
    """Whether the planner logs past byte ``logged``, within ``timeout_s``, that a batch was not
    published."""
    try:
        wait_until(
            lambda: b"not published" in log.read_bytes()[logged:],
            timeout_s=timeout_s,
            what="the planner to give its transaction up",
        )
    except WaitTimeout:
        return False
    return True
