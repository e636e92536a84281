"""The pipeline end to end: plans published on the plans topic, applier worker processes
(``graph-ingest worker applier``, each with its outbox relay beside it; relays of one schema
elect one active), done when every operation is COMPLETED in PostgreSQL **and** its COMPLETED
event is readable on the operations topic.

The appliers run as subprocesses, as they are deployed: two appliers then share no interpreter
lock (per-message Python work is what an applier spends its time on), and the peak RSS read from
``/proc/<pid>/status`` (VmHWM) is the applier's own. The benchmark process only publishes and
reads: the plan messages are built (verified, encoded: ``plan_message``) before the clock starts,
so the producer's own work is not counted; the clock runs from the first publish to the last
COMPLETED. The applier processes join their group and apply the warm-up plans before that.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from cpu import WORKERS, CpuGroups, CpuWindow, stack_pids
from isolation import check_completed, check_graph, isolated, schema_bytes, sql
from results import PACED, PIPELINE_1, PIPELINE_2, Run, percentiles
from workloads import Workload

from graph_ingest.kafka.headers import headers_of
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import pipeline_env
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until

# A paced producer publishes a chunk every PACE_INTERVAL_S.
PACE_INTERVAL_S = 0.02
COMPLETED = kafka_headers.STAGE, b"COMPLETED"


class CompletedEvents:
    """Reads the operations topic from its start (read_committed) in a thread: when each
    operation's COMPLETED event was first readable here."""

    def __init__(self, settings: Settings) -> None:
        topics = settings.topics
        self._consumer = Consumer(
            settings.kafka.consumer_config(f"bench-reader-{uuid.uuid4().hex[:8]}")
        )
        self._consumer.assign(
            [
                TopicPartition(topics.operations, p, OFFSET_BEGINNING)
                for p in range(topics.operation_partitions)
            ]
        )
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="bench-events", daemon=True)

    def __enter__(self) -> CompletedEvents:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._consumer.close()

    def _read(self) -> None:
        while not self._stop.is_set():
            # poll() returns as soon as one message is there (consume() would wait out its
            # timeout for a full batch, adding up to that much to every latency read here)
            first = self._consumer.poll(0.1)
            if first is None:
                continue
            now = time.time()
            for message in [first, *self._consumer.consume(num_messages=1000, timeout=0)]:
                headers = headers_of(message)
                if message.error() is None and COMPLETED in headers:
                    operation = kafka_headers.header_text(headers, kafka_headers.OPERATION_ID)
                    if operation is not None:
                        self.seen.setdefault(operation, now)

    def wait_for(self, operation_ids: Sequence[str], timeout_s: float) -> float:
        """When the last of ``operation_ids``' COMPLETED events was read (epoch seconds)."""
        wait_until(
            lambda: all(op in self.seen for op in operation_ids),
            timeout_s=timeout_s,
            interval_s=0.05,
            what=f"COMPLETED events of {len(operation_ids)} operations",
        )
        return max(self.seen[op] for op in operation_ids)


@contextmanager
def worker_processes(
    settings: Settings, worker: str, count: int, logs: Path, **env: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` ``graph-ingest worker <worker>`` processes on ``settings`` (``env``: more
    variables); yields them. Stopped with SIGTERM (they finish the batch in hand), killed if they
    do not exit in 60 s; sent SIGTERM by the kernel if this process dies first (``start_bound``)."""
    environment = {**os.environ, **pipeline_env(settings), **env}
    logs.mkdir(parents=True, exist_ok=True)
    processes = []
    try:
        for index in range(count):
            log = logs / f"{settings.postgres.schema_name}-{worker}-{index}.log"
            with log.open("wb") as out:
                processes.append(
                    start_bound(
                        [sys.executable, "-m", "graph_ingest.cli.main", "worker", worker],
                        env=environment,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        yield processes
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def applier_processes(
    settings: Settings, count: int, logs: Path, **env: str
) -> Iterator[list[int]]:
    """``count`` appliers (``worker_processes``), once they share every plans partition; yields
    their pids."""
    with worker_processes(settings, "applier", count, logs, **env) as processes:
        wait_for_group(
            settings,
            processes,
            settings.applier.group_id,
            settings.topics.plans,
            settings.topics.plan_partitions,
        )
        yield [p.pid for p in processes]


def wait_for_group(
    settings: Settings,
    processes: Sequence[subprocess.Popen[bytes]],
    group: str,
    topic: str,
    partitions: int,
) -> None:
    """Until ``group`` is stable with one member per process and each of ``topic``'s
    ``partitions`` taken."""
    config: dict[str, Any] = {
        **settings.kafka.common_config(),
        "logger": logging.getLogger("kafka"),
    }
    admin = AdminClient(config)

    def ready() -> bool:
        dead = [p.args for p in processes if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a worker process exited early: {dead}")
        try:
            description = admin.describe_consumer_groups([group], request_timeout=5)[group].result()
        except KafkaException:  # no coordinator yet (a new group, a new cluster)
            return False
        taken = {
            tp.partition
            for member in description.members
            for tp in member.assignment.topic_partitions
            if tp.topic == topic
        }
        return (
            description.state == ConsumerGroupState.STABLE
            and len(description.members) == len(processes)
            and len(taken) == partitions
        )

    wait_until(ready, timeout_s=120, interval_s=0.2, what=f"{len(processes)} members of {group}")


def peak_rss(pid: int) -> int:
    """VmHWM of a running process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def publish(
    producer: KafkaProducer, messages: Sequence[OutboxMessage], rate: float | None
) -> dict[str, float]:
    """Produce ``messages`` (all at once, or ``rate`` plans/s in small chunks); returns when
    each was handed to the producer (epoch seconds), by operation id."""
    sent: dict[str, float] = {}
    chunk = len(messages) if rate is None else max(1, round(rate * PACE_INTERVAL_S))
    started = time.monotonic()
    for start in range(0, len(messages), chunk):
        if rate is not None:
            time.sleep(max(0.0, started + start / rate - time.monotonic()))
        now = time.time()
        part = messages[start : start + chunk]
        producer.produce_batch(part)
        sent.update((m.operation_id or "", now) for m in part)
    return sent


def completed_at(settings: Settings) -> dict[str, float]:
    """Each operation's COMPLETED stage time from PostgreSQL (epoch seconds)."""
    rows = sql(settings, "SELECT operation_id, stage_times->>'COMPLETED' FROM operations")
    return {op: datetime.fromisoformat(at).timestamp() for op, at in rows if at is not None}


@dataclass(frozen=True)
class Running:
    """A run's pipeline, its warm-up and setup plans applied: ready for the measured plans."""

    settings: Settings
    producer: KafkaProducer
    events: CompletedEvents
    applier_pids: list[int]
    timeout_s: float

    def publish(
        self, workload: Workload, rate: float | None = None
    ) -> tuple[dict[str, float], float]:
        """Publish the measured plans (at once, or ``rate`` plans/s): when each was sent, and
        when the last of their COMPLETED events was read (epoch seconds)."""
        messages = workload.messages(workload.plans, self.settings.topics.plans)
        sent = publish(self.producer, messages, rate)
        measured = [p.operation_id for p in workload.plans]
        return sent, self.events.wait_for(measured, self.timeout_s)


@contextmanager
def running(
    settings: Settings, workload: Workload, *, appliers: int, logs: Path, **env: str
) -> Iterator[Running]:
    """``appliers`` processes on ``settings`` (``isolated``; ``env``: more variables), the
    workload's warm-up and setup plans applied by them; stopped when the block ends."""
    timeout_s = 600 + len(workload.plans) / 10
    with (
        KafkaProducer(settings.kafka) as producer,
        CompletedEvents(settings) as events,
        applier_processes(settings, appliers, logs, **env) as pids,
    ):
        for group in (workload.warmup, workload.setup):
            if group:
                publish(producer, workload.messages(group, settings.topics.plans), None)
                events.wait_for([p.operation_id for p in group], timeout_s)
        yield Running(settings, producer, events, pids, timeout_s)


def check_run(settings: Settings, workload: Workload) -> None:
    """Every plan COMPLETED, and the graph exactly what the plans say."""
    check_completed(settings, workload.applied)
    check_graph(settings, workload.graph.node_label, workload.applied)


def pipeline(
    base: Settings,
    workload: Workload,
    *,
    appliers: int,
    logs: Path,
    rate: float | None = None,
    latency_method: str = PACED,
) -> Run:
    """One run: ``appliers`` processes; the measured plans published at once, or at ``rate``
    plans/s (then the run, named ``latency_method``, reports publish→COMPLETED latency
    percentiles: to the stage in PostgreSQL, and to its event read from the operations topic)."""
    with isolated(base) as settings:
        measured = [p.operation_id for p in workload.plans]
        with running(settings, workload, appliers=appliers, logs=logs) as run:
            before = schema_bytes(settings)
            window = CpuWindow(CpuGroups({WORKERS: run.applier_pids, **stack_pids(settings)}))
            window.start()
            sent, last_event = run.publish(workload, rate)
            window.stop()
            rss = max(peak_rss(pid) for pid in run.applier_pids)
        completed = completed_at(settings)
        growth = schema_bytes(settings) - before
        check_run(settings, workload)
    first = min(sent.values())
    last = max(last_event, *(completed[op] for op in measured))
    latency = [(completed[op] - sent[op]) * 1000 for op in measured]
    event_latency = [(run.events.seen[op] - sent[op]) * 1000 for op in measured]
    return Run.of(
        workload,
        latency_method if rate is not None else PIPELINE_1 if appliers == 1 else PIPELINE_2,
        last - first,
        peak_rss_bytes=rss,
        pg_bytes_per_plan=growth / len(workload.plans),
        latency_ms=percentiles(latency) if rate is not None else None,
        paced_plans_per_s=rate,
        cpu_s=window.spent,
        jit_s=window.jit_spent,
        details={
            "appliers": appliers,
            "event_latency_ms": percentiles(event_latency) if rate is not None else None,
        },
    )
