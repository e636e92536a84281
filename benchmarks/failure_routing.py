"""Failure-routing figures (issue 6), on the local dev stack (started if needed):

* ``lateness``: plans whose graph write always times out walk the whole retry ladder (default
  1s / 5s / 30s) into the DLQ; per tier, how long after its due time each copy was handed to the
  applier (p50 / p99 over every hop), as the consumer logs it. While a failing batch is retried
  in place every partition waits, tiers included: each failing delivery here is tried once in
  place after ``--in-place-backoff`` seconds (the setting's default is 0.5 s), so with every plan
  failing that wait shows in the lateness too.
* ``outage``: a producer offers ``--rate`` plans/s while Neo4j or PostgreSQL is killed for
  ``--outage`` seconds; once the service is back: the time to the first apply, the backlog, and
  the rate it drains at next to the applier's maximum rate on a backlog (measured in the same run).
* ``replay``: ``--plans`` plans dead-lettered, then ``graph-ingest dlq replay-all``: its rate, and
  the time until every replayed plan is COMPLETED.

    python benchmarks/failure_routing.py lateness [--plans 20] [--spacing 0.5] [--in-place-backoff 0.05]
    python benchmarks/failure_routing.py outage [--service neo4j|postgres] [--rate 50] [--outage 60]
    python benchmarks/failure_routing.py replay [--plans 500]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from isolation import graph_label, isolated
from pipeline_run import pipeline
from workloads import build, small_plans

from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import GraphError
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.kafka.consumer import TIER_LATENESS
from graph_ingest.producers.plan_publisher import PlanPublisher
from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import pipeline_env
from graph_ingest.stack.manager import LocalStack
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_applier


class TimingOut(Neo4jGraphWriter):
    """Every graph write times out; probes answer (the plan is to blame, not Neo4j)."""

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        raise GraphError("injected: the write timed out", code=StatusCode.DEADLINE_EXCEEDED)


class _Deliveries(logging.Handler):
    """Collects the consumer's records of retry-tier deliveries."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, TIER_LATENESS):
            self.records.append(record)


def _rows(settings: Settings, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def lateness(base: Settings, count: int, spacing_s: float, in_place_backoff_s: float) -> None:
    with isolated(
        base,
        in_place_max_attempts=1,
        retry_initial_backoff_s=in_place_backoff_s,
    ) as settings:
        delays = settings.topics.retry_delays_s
        plans = small_plans(count, GraphOptions(node_label=f"B_{settings.postgres.schema_name}"))
        stop = threading.Event()
        deliveries = _Deliveries()
        consumer_log = logging.getLogger("graph_ingest.kafka.consumer")
        consumer_log.addHandler(deliveries)
        consumer_log.setLevel(logging.DEBUG)
        worker = threading.Thread(
            target=run_applier,
            args=(settings, stop),
            kwargs={"graph": TimingOut(settings.neo4j)},
        )
        worker.start()
        try:
            with PlanPublisher(settings) as publisher:
                for plan in plans:
                    publisher.publish([plan])
                    time.sleep(spacing_s)
            wait_until(
                lambda: _rows(settings, "SELECT count(*) FROM dlq_entries")[0][0] == count,
                timeout_s=sum(delays) * 3 + 120,
                interval_s=0.5,
                what="every plan in the DLQ",
            )
        finally:
            stop.set()
            worker.join(timeout=120)
    late: dict[int, list[float]] = {index: [] for index in range(len(delays))}
    tiers = {topic: index for index, (topic, _) in enumerate(settings.topics.retry_tiers)}
    for record in deliveries.records:
        late[tiers[record.args[0]]].append(getattr(record, TIER_LATENESS))  # type: ignore[index]
    print(
        f"{count} plans published {spacing_s:g}s apart, each walking {len(delays)} tiers "
        f"into the DLQ; in-place backoff {in_place_backoff_s:g}s"
    )
    print("tier     hops   lateness p50   p99     min")
    for index, values in late.items():
        print(
            f"{delays[index]:>5g}s  {len(values):5d}   {_percentile(values, 0.5) * 1000:8.0f} ms"
            f" {_percentile(values, 0.99) * 1000:6.0f} ms {min(values) * 1000:6.0f} ms"
        )
    every = [v for values in late.values() for v in values]
    print(
        f"all      {len(every):5d}   {statistics.median(every) * 1000:8.0f} ms"
        f" {_percentile(every, 0.99) * 1000:6.0f} ms"
    )


class Refusing(Neo4jGraphWriter):
    """Every graph write is refused as the plan's fault: each plan goes to the DLQ at once."""

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        raise GraphError("injected: refused", code=StatusCode.FAILED_PRECONDITION)


def replay(base: Settings, count: int) -> None:
    """``count`` plans dead-lettered, then ``graph-ingest dlq replay-all`` with a healthy applier:
    the command's rate, and the time until every replayed plan is COMPLETED."""
    with isolated(base) as settings:
        plans = small_plans(count, GraphOptions(node_label=f"B_{settings.postgres.schema_name}"))
        stop = threading.Event()
        refusing = threading.Thread(
            target=run_applier, args=(settings, stop), kwargs={"graph": Refusing(settings.neo4j)}
        )
        refusing.start()
        with PlanPublisher(settings) as publisher:
            publisher.publish(plans)
        wait_until(
            lambda: _rows(settings, "SELECT count(*) FROM dlq_entries")[0][0] == count,
            timeout_s=300,
            interval_s=0.5,
            what="every plan in the DLQ",
        )
        stop.set()
        refusing.join(timeout=120)
        stop = threading.Event()
        healthy = threading.Thread(target=run_applier, args=(settings, stop))
        healthy.start()
        try:
            started = time.monotonic()
            command = subprocess.run(
                [sys.executable, "-m", "graph_ingest.cli.main", "dlq", "replay-all", "--json"],
                env={**os.environ, **pipeline_env(settings)},
                capture_output=True,
                check=False,
            )
            replayed_s = time.monotonic() - started
            if command.returncode != 0:
                raise RuntimeError(command.stderr.decode()[-2000:])
            wait_until(
                lambda: _completed(settings) >= count, timeout_s=600, interval_s=0.2, what="all"
            )
            completed_s = time.monotonic() - started
        finally:
            stop.set()
            healthy.join(timeout=120)
    print(f"{count} DLQ entries replayed by `graph-ingest dlq replay-all`")
    print(f"replay-all took        : {replayed_s:6.1f} s ({count / replayed_s:6.1f} entries/s)")
    print(f"all COMPLETED after    : {completed_s:6.1f} s")


def outage(base: Settings, service: str, rate: float, outage_s: float) -> None:
    stack = LocalStack(base)
    max_rate = _max_rate(base)
    before_s, after_s = 10.0, 30.0
    total = int(rate * (before_s + outage_s + after_s))
    label = f"B_outage_{uuid.uuid4().hex[:8]}"
    with isolated(base) as settings, graph_label(base, label):
        plans = small_plans(total, GraphOptions(node_label=label))
        stop = threading.Event()
        worker = threading.Thread(target=run_applier, args=(settings, stop))
        worker.start()
        published_at: list[float] = []

        def offer() -> None:
            with PlanPublisher(settings) as publisher:
                started = time.monotonic()
                for index in range(0, total, 10):
                    publisher.publish(plans[index : index + 10])
                    published_at.append(time.time())
                    wait = started + (index + 10) / rate - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)

        producer = threading.Thread(target=offer)
        try:
            producer.start()
            time.sleep(before_s)
            stack.stop_service(service, hard=True)
            time.sleep(outage_s)
            stack.start_service(service)
            back = datetime.now(UTC)
            backlog = len(published_at) * 10 - _completed(settings)
            wait_until(
                lambda: _completed(settings) >= total, timeout_s=600, interval_s=0.2, what="all"
            )
            producer.join()
            first_apply, caught_up = _rows(
                settings,
                "SELECT min((stage_times->>'GRAPH_APPLIED')::timestamptz), "
                "max((stage_times->>'COMPLETED')::timestamptz) FROM operations "
                "WHERE (stage_times->>'GRAPH_APPLIED')::timestamptz > %s",
                back,
            )[0]
        finally:
            stop.set()
            worker.join(timeout=120)
    drain_s = (caught_up - back).total_seconds()
    offered_meanwhile = rate * drain_s
    drain_rate = (backlog + offered_meanwhile) / drain_s
    print(f"{service} killed for {outage_s:g}s while {rate:g} plans/s were offered ({total} plans)")
    print(f"first apply after it was back : {(first_apply - back).total_seconds():6.2f} s")
    print(f"backlog when it was back      : {backlog:6d} plans")
    print(f"caught up after               : {drain_s:6.1f} s")
    print(
        f"drain rate                    : {drain_rate:6.0f} plans/s, "
        f"{drain_rate / max_rate:.0%} of the applier's maximum ({max_rate:.0f} plans/s)"
    )


def _max_rate(base: Settings) -> float:
    """Plans/s of one applier (with its relay) on 2,000 small plans published at once."""
    label = f"B_max_{uuid.uuid4().hex[:8]}"
    with graph_label(base, label):
        workload = build("small", 2000, GraphOptions(node_label=label))
        return pipeline(base, workload, appliers=1, logs=Path("build/bench/logs")).plans_per_s


def _completed(settings: Settings) -> int:
    return int(_rows(settings, "SELECT count(*) FROM operations WHERE stage = 'COMPLETED'")[0][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="figure", required=True)
    late = sub.add_parser("lateness")
    late.add_argument("--plans", type=int, default=20)
    late.add_argument(
        "--spacing",
        type=float,
        default=0.5,
        help="seconds between plans (0: one burst, so failing batches delay the due copies)",
    )
    late.add_argument("--in-place-backoff", type=float, default=0.05)
    down = sub.add_parser("outage")
    down.add_argument("--service", choices=["neo4j", "postgres"], default="neo4j")
    down.add_argument("--rate", type=float, default=50.0)
    down.add_argument("--outage", type=float, default=60.0)
    again = sub.add_parser("replay")
    again.add_argument("--plans", type=int, default=500)
    args = parser.parse_args()
    settings = Settings()
    LocalStack(settings).up()
    if args.figure == "lateness":
        lateness(settings, args.plans, args.spacing, args.in_place_backoff)
    elif args.figure == "replay":
        replay(settings, args.plans)
    else:
        outage(settings, args.service, args.rate, args.outage)


if __name__ == "__main__":
    main()
