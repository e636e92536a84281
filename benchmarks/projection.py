"""The read side's figures (issue 18): the projector beside the pipeline, and its ceiling.

    python benchmarks/projection.py [--plans 1000] [--fold-batch 5000] [--out DIR]

One run of ``make bench``'s small workload (10 nodes + 10 edges a plan) through the real
pipeline (one applier process, as ``pipeline_run.py`` runs it) WITH a ``graph-ingest worker
projector`` process folding the operations topic into the read tables. The projector starts
after the warm-up plans and folds them before the clock starts; the clock runs from the first
publish of the measured plans. Printed side by side:

* the pipeline's plans/s (first publish -> last COMPLETED, as ``throughput.py`` counts it);
* the projector's events/s folded: the measured operations' events on the operations topic over
  first publish -> the fold of the last of them (when ``operation_status``'s position last
  moved). The projector cannot fold faster than the applier publishes: this rate is paced by
  the pipeline, which is why the ceiling below is printed beside it;
* its lag, read every ``LAG_INTERVAL_S`` with ``projections.lag_reader`` (offsets and seconds
  behind: max and p95 of the samples);
* the time from the last COMPLETED on the write side (its stage time in PostgreSQL) to the
  projection having folded it (and from when this process read its event on the topic: negative
  when the projector read it first);
* CPU seconds (``/proc``) of the projector process and of every PostgreSQL server process over
  the same window, per 1,000 events. PostgreSQL's figure is the whole server's: the applier's
  writes as well as the projector's folds (the ceiling's gives the folds' share);
* the fold-only ceiling: the same events, read back from the topic first, folded straight into
  fresh read tables in this process (``ReadFolds.fold`` on batches of ``--fold-batch``) with
  nothing else running: events/s, this thread's CPU and PostgreSQL's per 1,000 events.

Uses the stack that ``Settings()`` describes, started if needed (GRAPH_INGEST_STACK__* moves it);
the run gets its own topics, schemas, groups and graph label, dropped afterwards. Checks that
every plan COMPLETED, the graph is exact and the projection shows every operation COMPLETED; it
asserts no rate.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from confluent_kafka import KafkaError, TopicPartition
from cpu import POSTGRES, stack_pids
from isolation import bench_stack, graph_label, isolated, sql
from pipeline_run import check_run, completed_at, running, worker_processes
from results import percentiles
from workloads import Workload, build

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.kafka.consumer import open_consumer, read_retry
from graph_ingest.kafka.headers import headers_of
from graph_ingest.projections.events import OperationEvent, decode_operation_event
from graph_ingest.projections.lag import LagState
from graph_ingest.projections.lag_reader import operations_lag
from graph_ingest.projections.read_folds import ReadFolds
from graph_ingest.projections.rebuild_reader import end_offsets
from graph_ingest.projections.rebuild_schema import drop_schema, make_like
from graph_ingest.projections.tables import OPERATION_STATUS, ReadTables, read_schema
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until

log = logging.getLogger("projection")

LAG_INTERVAL_S = 0.5
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[str]:
    """``/proc/<pid>/stat`` after the command name (which may hold spaces): state is [0]."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU of ``pid``; ``reaped``: with its waited-for children's."""
    fields = _stat_fields(pid)
    return sum(int(f) for f in fields[11 : 15 if reaped else 13]) * TICK_S


def postgres_cpu_seconds(postmaster: int) -> float:
    """CPU of the postmaster and of every server process under it. A backend that has exited
    was reaped by the postmaster, so its time is in the postmaster's children's time: the
    difference of two readings counts it either way (one that exits between the two reads of
    one reading is missed or counted twice: a backend's life, here pools that live all run)."""
    total = cpu_seconds(postmaster, reaped=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = _stat_fields(stat.parent.name)
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == postmaster:
            total += sum(int(f) for f in fields[11:15]) * TICK_S
    return total


def postmaster_pid(settings: Settings) -> int:
    """The PostgreSQL server's postmaster: the stack's postgres service. (Not the parent of a
    backend: the backend of a closed connection can be gone before its /proc entry is read.)"""
    return stack_pids(settings, [POSTGRES])[POSTGRES][0]


@dataclass
class LagSampler:
    """Reads the projection's lag every ``LAG_INTERVAL_S`` in a thread, while the block runs."""

    settings: Settings
    offsets: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _failed: list[BaseException] = field(default_factory=list)

    def __enter__(self) -> LagSampler:
        self._tables = ReadTables(self.settings.postgres)
        self._tables.start()
        self._thread = threading.Thread(target=self._sample, name="bench-lag", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._tables.close()
        if self._failed:
            raise RuntimeError("reading the lag failed") from self._failed[0]

    def _sample(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                lag = operations_lag(self.settings, self._tables, timeout_s=30)
                self.offsets.append(lag.offsets_behind)
                self.seconds.append(lag.seconds_behind)
                self._stop.wait(max(0.0, started + LAG_INTERVAL_S - time.monotonic()))
        except BaseException as exc:
            self._failed.append(exc)


def running_projector(projector: subprocess.Popen[bytes]) -> bool:
    """True while ``projector`` runs; one that exited fails the run (its log says why)."""
    if projector.poll() is not None:
        raise RuntimeError(f"the projector exited ({projector.returncode}): see its log")
    return True


def projection_idle(
    settings: Settings, projector: subprocess.Popen[bytes], timeout_s: float
) -> None:
    """Until the projection has folded everything on its topic (the warm-up plans)."""
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        wait_until(
            lambda: (
                running_projector(projector)
                and operations_lag(settings, tables).state is LagState.IDLE
            ),
            timeout_s=timeout_s,
            interval_s=0.2,
            what="the projector folding the warm-up plans",
        )
    finally:
        tables.close()


def projected_at(
    settings: Settings,
    projector: subprocess.Popen[bytes],
    operation_ids: Sequence[str],
    timeout_s: float,
) -> float:
    """Once the projection shows every one of ``operation_ids`` COMPLETED: when its position on
    the operations topic last moved, i.e. the fold of the last event (epoch seconds)."""
    schema = read_schema(settings.postgres)
    count = (
        f'SELECT count(*) FROM "{schema}".operation_status '
        "WHERE stage = 'COMPLETED' AND operation_id = ANY(%s)"
    )

    def all_completed() -> bool:
        [(completed,)] = sql(settings, count, list(operation_ids))
        return running_projector(projector) and completed == len(operation_ids)

    wait_until(
        all_completed,
        timeout_s=timeout_s,
        interval_s=0.1,
        what=f"the projection of {len(operation_ids)} COMPLETED operations",
    )
    [(moved,)] = sql(
        settings,
        f'SELECT max(updated_at) FROM "{schema}".tracking_positions '
        "WHERE projection = %s AND topic = %s",
        OPERATION_STATUS,
        settings.topics.operations,
    )
    return float(moved.timestamp())


@dataclass(frozen=True)
class Live:
    """The measured window of the pipeline with the projector beside it."""

    first_publish: float
    last_completed: float
    """The last COMPLETED stage time in PostgreSQL (the write side's commit)."""
    last_event: float
    """When the last COMPLETED event was read from the operations topic."""
    folded_last: float
    projector_cpu_s: float
    postgres_cpu_s: float
    lag_offsets: list[int]
    lag_seconds: list[float]


def live_run(settings: Settings, workload: Workload, logs: Path) -> Live:
    """The measured plans through one applier, a projector folding beside it."""
    measured = [p.operation_id for p in workload.plans]
    postmaster = postmaster_pid(settings)
    with (
        running(settings, workload, appliers=1, logs=logs) as run,
        worker_processes(settings, "projector", 1, logs) as [projector],
    ):
        projection_idle(settings, projector, run.timeout_s)
        cpu_before = cpu_seconds(projector.pid), postgres_cpu_seconds(postmaster)
        with LagSampler(settings) as lag:
            sent, last_event = run.publish(workload)
            folded_last = projected_at(settings, projector, measured, run.timeout_s)
        projector_cpu = cpu_seconds(projector.pid) - cpu_before[0]
        postgres_cpu = postgres_cpu_seconds(postmaster) - cpu_before[1]
    completed = completed_at(settings)
    return Live(
        first_publish=min(sent.values()),
        last_completed=max(completed[op] for op in measured),
        last_event=last_event,
        folded_last=folded_last,
        projector_cpu_s=projector_cpu,
        postgres_cpu_s=postgres_cpu,
        lag_offsets=lag.offsets,
        lag_seconds=lag.seconds,
    )


def operation_events(settings: Settings, operation_ids: set[str]) -> list[OperationEvent]:
    """Every event of ``operation_ids`` on the operations topic, read to its end."""
    topic = settings.topics.operations
    end = end_offsets(settings, [topic])
    kafka = settings.kafka
    consumer = open_consumer(
        kafka.consumer_config(
            f"bench-fold-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}
        ),
        context="reading the operations topic back",
    )
    events: list[OperationEvent] = []
    pending = set(end)
    deadline = time.monotonic() + 300
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in end])
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                partition = (message.topic() or "", message.partition() or 0)
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(partition)
                    continue
                if (message.offset() or 0) >= end[partition] - 1:
                    pending.discard(partition)
                headers = headers_of(message)
                event = decode_operation_event(message, headers, read_retry(headers))
                if event.operation and event.operation.operation_id in operation_ids:
                    events.append(event)
    finally:
        consumer.close()
    if pending:
        raise RuntimeError(f"{topic}: partitions {sorted(pending)} not read to their end")
    return events


@dataclass(frozen=True)
class Ceiling:
    events: int
    seconds: float
    client_cpu_s: float
    postgres_cpu_s: float


def fold_ceiling(settings: Settings, events: list[OperationEvent], batch: int) -> Ceiling:
    """``events`` folded by ``ReadFolds.fold`` in batches of ``batch`` into fresh read tables
    (made like the live ones, dropped afterwards), nothing else running."""
    live = read_schema(settings.postgres)
    fresh = f"{live}_ceiling"
    postmaster = postmaster_pid(settings)
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        make_like(conn, live, fresh)
        tables = ReadTables(settings.postgres, schema=fresh)
        tables.start()
        try:
            folds = ReadFolds(tables, settings.topics)
            folds.fold(events[:1])  # not timed: the pool's connections open, statements planned
            timed = events[1:]
            before = time.perf_counter(), time.thread_time(), postgres_cpu_seconds(postmaster)
            for start in range(0, len(timed), batch):
                folds.fold(timed[start : start + batch])
            seconds = time.perf_counter() - before[0]
            client_cpu = time.thread_time() - before[1]
            postgres_cpu = postgres_cpu_seconds(postmaster) - before[2]
        finally:
            tables.close()
            drop_schema(conn, fresh)
    return Ceiling(len(timed), seconds, client_cpu, postgres_cpu)


def report(workload: Workload, live: Live, events: int, ceiling: Ceiling, batch: int) -> str:
    """The figures, side by side, and their ratios."""
    plans = len(workload.plans)
    pipeline_s = max(live.last_completed, live.last_event) - live.first_publish
    projector_s = live.folded_last - live.first_publish
    rate, ceiling_rate = events / projector_s, ceiling.events / ceiling.seconds
    per_k, ceiling_per_k = 1000 / events, 1000 / ceiling.events
    offsets = percentiles([float(o) for o in live.lag_offsets])
    seconds = percentiles(live.lag_seconds)
    ceiling_cpu = (ceiling.client_cpu_s + ceiling.postgres_cpu_s) * ceiling_per_k
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join(
        [
            f"{workload.name} workload, {plans:,} plans, {events:,} operation events "
            f"({events / plans:.1f} a plan); load average at the end {load}",
            f"pipeline (1 applier):   {plans / pipeline_s:,.1f} plans/s ({pipeline_s:.1f} s)",
            f"projector:              {rate:,.0f} events/s folded ({projector_s:.1f} s from first "
            f"publish to the last fold); CPU {live.projector_cpu_s:.2f} s = "
            f"{live.projector_cpu_s * per_k:.3f} s per 1,000 events "
            f"({live.projector_cpu_s / projector_s:.0%} of one core)",
            f"lag ({len(live.lag_offsets)} samples, every {LAG_INTERVAL_S} s): offsets max "
            f"{max(live.lag_offsets, default=0):,}, p95 {offsets['p95']:,.0f}; seconds max "
            f"{max(live.lag_seconds, default=0):.2f}, p95 {seconds['p95']:.2f}",
            f"last COMPLETED (write side, PostgreSQL) -> folded: "
            f"{live.folded_last - live.last_completed:.2f} s (its event read from the topic "
            f"-> folded: {live.folded_last - live.last_event:.2f} s)",
            f"PostgreSQL, all server processes (applier + projector): "
            f"{live.postgres_cpu_s:.2f} s CPU = {live.postgres_cpu_s * per_k:.3f} s per 1,000 events",
            f"fold-only ceiling (ReadFolds.fold, batches of {batch:,}, fresh tables): "
            f"{ceiling_rate:,.0f} events/s ({ceiling.seconds:.2f} s); CPU per 1,000 events: "
            f"this thread {ceiling.client_cpu_s * ceiling_per_k:.3f} s, PostgreSQL "
            f"{ceiling.postgres_cpu_s * ceiling_per_k:.3f} s",
            f"ratios: projector / ceiling events/s {rate / ceiling_rate:.2f}; projector process "
            f"CPU per event / ceiling's (client + PostgreSQL) "
            f"{live.projector_cpu_s * per_k / ceiling_cpu:.2f}; projector events/s / events "
            f"published per s {rate / (events / pipeline_s):.2f}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--plans", type=int, default=1000, help="measured plans (small workload)")
    parser.add_argument("--fold-batch", type=int, default=5000, help="events a ceiling fold")
    parser.add_argument("--out", type=Path, default=Path("build/bench"), help="worker logs")
    args = parser.parse_args(argv)
    base = bench_stack()
    label = f"Bench_projection_{args.plans}_{uuid.uuid4().hex[:8]}"
    workload = build("small", args.plans, GraphOptions(node_label=label))
    with graph_label(base, label), isolated(base) as settings:
        live = live_run(settings, workload, args.out / "logs")
        check_run(settings, workload)
        log.info("measured; reading the events back for the fold-only ceiling")
        events = operation_events(settings, {p.operation_id for p in workload.plans})
        ceiling = fold_ceiling(settings, events, args.fold_batch)
    print(report(workload, live, len(events), ceiling, args.fold_batch))


if __name__ == "__main__":
    main()
