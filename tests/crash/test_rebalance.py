"""Appliers joining and leaving a busy consumer group (issue 9 items 3 and 13): real worker
processes share the group while plans flow; one is SIGTERMed and one SIGKILLed on the way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from graph_ingest.consumers.applier.worker import ApplierWorker
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import build_applier, postgres_store, started
from tests.crash.appliers import REPO, group_members, start_applier, wait_completed
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import FailingWriter
from tests.integration.test_applier import doc_v1
from tests.kafka_messages import group_offsets
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(420)]

PARTITIONS = 6
SECOND_APPLIER_STAGGER_S = 0.5


def test_appliers_joining_and_leaving_a_busy_group_strand_no_message(
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    pipeline = pipeline_factory(plan_partitions=PARTITIONS)
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(2500)]
    log = tmp_path / "appliers.log"

    # Given a backlog (the defect showed with 2,000 plans waiting and a second applier joining)
    pipeline.publish(*plans[:1500])
    first = start_applier(pipeline, log, "applier-1")
    processes.append(first)
    # When a second applier joins while the first takes its first batches (the revocation then
    # lands inside a poll that returns messages), and a third joins while plans keep coming.
    # The stagger is the scenario, not a synchronisation: the reported reproduction started the
    # second applier a moment after the first.
    time.sleep(SECOND_APPLIER_STAGGER_S)
    second = start_applier(pipeline, log, "applier-2")
    processes.append(second)
    publishing = pipeline.publish_in_steps(plans[1500:2000])
    wait_completed(pipeline, 600)
    processes.append(start_applier(pipeline, log, "applier-3"))
    publishing.join(timeout=120)
    # Then every plan completes while they all stay (a leave would hand a stranded partition to
    # a new owner and hide the defect)
    wait_completed(pipeline, 2000)
    # When one leaves politely, one by a crash, and another joins, while plans flow
    publishing = pipeline.publish_in_steps(plans[2000:2500])
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 0, log.read_text()[-3000:]
    os.kill(second.pid, signal.SIGKILL)
    second.wait(timeout=30)
    processes.append(start_applier(pipeline, log, "applier-4"))
    publishing.join(timeout=120)
    # Then every plan completes
    wait_completed(pipeline, len(plans))
    # and once the survivors leave (each has joined: a worker still starting has no SIGTERM
    # handler yet), every partition's committed offset is at its end
    wait_until(
        lambda: group_members(pipeline) == {"applier-3", "applier-4"},
        timeout_s=60,
        what="the survivors, and only they, in the group",
    )
    for survivor in processes[2:]:
        survivor.send_signal(signal.SIGTERM)
    for survivor in processes[2:]:
        assert survivor.wait(timeout=60) == 0, log.read_text()[-3000:]
    committed, ends = group_offsets(pipeline.settings, pipeline.settings.topics.plans, PARTITIONS)
    assert sum(ends.values()) == len(plans)
    assert committed == ends


def test_partitions_assigned_during_an_in_place_retry_stay_paused(
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    pipeline = pipeline_factory(
        plan_partitions=PARTITIONS,
        batch_max_plans=20,
        retry_initial_backoff_s=4.0,
        retry_max_backoff_s=4.0,
    )
    plans = [doc_v1(pipeline, f"doc-{i}") for i in range(600)]
    # Given two appliers of one group whose Neo4j is down: one in this process (to watch its
    # memory), one a worker process; both retry their first batch in place, partitions paused
    writer = FailingWriter(pipeline.settings, StatusCode.UNAVAILABLE)
    writer.sick.set()
    store = postgres_store(pipeline.settings)
    stop = threading.Event()
    with started(store, writer):
        worker = ApplierWorker(
            pipeline.settings,
            build_applier(pipeline.settings, store, writer),
        )
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        marker = tmp_path / "other-failing"
        other = start_bound(
            [sys.executable, "-m", "tests.crash.applier_process", str(marker), "neo4j-down"],
            cwd=REPO,
            env={**os.environ, **pipeline.env()},
            stdout=(tmp_path / "other.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        processes.append(other)
        peak = [0]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], len(worker._pending))
                sampling.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:

            def plan_partitions() -> int:  # the worker also owns retry-tier partitions
                topic = pipeline.settings.topics.plans
                return sum(owned == topic for owned, _ in worker._consumer.owned)

            wait_until(
                lambda: 0 < plan_partitions() < PARTITIONS,
                timeout_s=60,
                what="the group to share the partitions",
            )
            pipeline.publish(*plans)
            wait_until(
                lambda: writer.failures >= 1 and marker.exists(), timeout_s=60, what="both failing"
            )
            # When the worker process leaves, its partitions (and their backlog) go to the paused one
            other.send_signal(signal.SIGTERM)
            assert other.wait(timeout=60) == 0, (tmp_path / "other.log").read_text()[-3000:]
            wait_until(
                lambda: plan_partitions() == PARTITIONS,
                timeout_s=60,
                what="every partition assigned to the paused applier",
            )
            failures = writer.failures
            wait_until(
                lambda: writer.failures >= failures + 2, timeout_s=60, what="two more retries"
            )
            # Then what those partitions hold stays in Kafka, not in the paused worker's memory
            assert peak[0] <= 2 * pipeline.settings.applier.batch_max_plans
            # and once Neo4j is back, everything applies
            writer.sick.clear()
            wait_completed(pipeline, len(plans))
        finally:
            sampling.set()
            stop.set()
            thread.join(timeout=60)
    assert pipeline.sql("SELECT count(*) FROM operations WHERE stage <> 'COMPLETED'") == [(0,)]


def test_retries_held_by_a_killed_applier_are_delivered_by_the_survivor_never_early(
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    delays = (1.0, 2.0, 4.0)
    pipeline = pipeline_factory(
        plan_partitions=PARTITIONS,
        retry_delays_s=delays,
        in_place_max_attempts=1,
        retry_initial_backoff_s=0.05,
        retry_max_backoff_s=0.2,
    )
    flaky = [
        sample_plan(
            "it", f"doc-{i}", "-", [Entity("Person", f"retry {i}")], [], graph=pipeline.graph
        )
        for i in range(60)
    ]
    steady = [doc_v1(pipeline, f"doc-steady-{i}") for i in range(60)]
    # Given two appliers whose graph writes of the flaky plans time out while `flaky` exists
    flaky_while = tmp_path / "flaky"
    flaky_while.touch()
    env = {**os.environ, **pipeline.env(), "FLAKY_WHILE": str(flaky_while)}
    appliers = {}
    for name in ("applier-1", "applier-2"):
        appliers[name] = start_bound(
            [
                sys.executable,
                "-m",
                "tests.crash.applier_process",
                str(tmp_path / name),
                "flaky",
            ],
            cwd=REPO,
            env={**env, "GRAPH_INGEST_KAFKA__CLIENT_ID": name},
            stdout=(tmp_path / f"{name}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        processes.append(appliers[name])
    wait_until(
        lambda: group_members(pipeline) == set(appliers), timeout_s=60, what="both in the group"
    )
    pipeline.publish(*flaky, *steady)
    # When retry copies are waiting on the tiers (held, not yet due), one applier is SIGKILLed
    # 20 operations, not 20 rows: one can fail again on a tier before others fail at all
    wait_until(
        lambda: (
            pipeline.sql("SELECT count(DISTINCT operation_id) FROM failure_attempts")[0][0] >= 20
        ),
        timeout_s=60,
        what="20 operations with a routed failure",
    )
    appliers["applier-1"].kill()
    appliers["applier-1"].wait(timeout=30)
    # and the survivor routes another failure (before any plan could walk the ladder to the DLQ)
    routed_at_kill = pipeline.sql("SELECT count(*) FROM failure_attempts")[0][0]
    wait_until(
        lambda: pipeline.sql("SELECT count(*) FROM failure_attempts")[0][0] > routed_at_kill,
        timeout_s=30,
        what="a failure routed after the kill",
    )
    flaky_while.unlink()
    # Then the survivor delivers every retry, none lost, none stuck paused
    wait_completed(pipeline, len(flaky) + len(steady), timeout_s=120)
    # and none early: each delivery after a failure came at least its tier's delay later
    rows = pipeline.sql(
        "SELECT operation_id, attempt, tier, at FROM failure_attempts ORDER BY operation_id, attempt"
    )
    failures: dict[str, list[tuple[int | None, Any]]] = {}
    for operation_id, _, tier, at in rows:
        failures.setdefault(operation_id, []).append((tier, at))
    assert len(failures) >= 20
    for operation_id, history in failures.items():
        operation = pipeline.store.get_operation(operation_id)
        assert operation is not None
        deliveries = [at for _, at in history[1:]] + [operation.stage_times[Stage.GRAPH_APPLIED]]
        for (tier, failed_at), next_delivery in zip(history, deliveries, strict=True):
            next_tier = 0 if tier is None else tier + 1
            assert (next_delivery - failed_at).total_seconds() >= delays[next_tier], operation_id
    assert pipeline.sql("SELECT count(*) FROM dlq_entries") == [(0,)]
