"""The apply path alone, in process: CPU of ``PlanApplier.apply`` per plan and the database
round trips per batch, without Kafka, decoding or the relay.

    python benchmarks/apply_batch.py [--workload small] [--plans 2000] [--batch 200]
                                     [--pause S] [--profile]

Applies the workload's warm-up, then its plans in batches of ``--batch`` (as the applier does
when it drains a backlog), on a schema and label of its own. Prints the calling thread's CPU ms
per plan, and PostgreSQL's and Neo4j's over the same window (``cpu.py``: what a change to a
statement or a table costs the databases, without Kafka's and the workers' noise); the
PostgreSQL statements and Neo4j queries per batch (counted at the drivers' calls), each batch's
wall time and its Neo4j write's (p50/p95/p99/max: ``--batch 1 --pause 0.03`` is a trickle of
lone plans without Kafka, where a slow graph write shows), and with ``--profile`` the heaviest
functions (cProfile, cumulative and own time).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import neo4j
import psycopg
from cpu import NEO4J, POSTGRES, CpuGroups, CpuWindow, stack_pids
from isolation import bench_stack, graph_label, isolated
from results import percentiles
from workloads import build

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.schemas.plan_messages import plan_message
from graph_ingest.wiring import build_applier, postgres_store, started


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count the statements psycopg's cursors and Neo4j's transactions send, by first words."""
    counts: Counter[str] = Counter()
    pg_execute = psycopg.Cursor.execute
    neo_run = neo4j.ManagedTransaction.run

    def execute(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        counts["postgres"] += 1
        counts["pg: " + " ".join(str(query).split()[:3])[:40]] += 1
        return pg_execute(self, query, *args, **kwargs)

    def run(self: neo4j.ManagedTransaction, query: Any, *args: Any, **kwargs: Any) -> Any:
        counts["neo4j"] += 1
        return neo_run(self, query, *args, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    neo4j.ManagedTransaction.run = run  # type: ignore[method-assign,assignment]
    try:
        yield counts
    finally:
        psycopg.Cursor.execute = pg_execute  # type: ignore[method-assign]
        neo4j.ManagedTransaction.run = neo_run  # type: ignore[method-assign]


def timed(call: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
    """``call``, appending each call's wall time (ms) to ``into``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - started) * 1000)

    return wrapper


def messages(plans: tuple[IngestionPlan, ...], start: int) -> list[PlanMessage]:
    """The plans as the applier's consumer hands them over: decoded, with their headers."""
    out = []
    for i, plan in enumerate(plans):
        sent = plan_message(plan, "bench.plans")
        headers = tuple((k, v.encode()) for k, v in sent.headers.items())
        out.append(
            PlanMessage("bench.plans", 0, start + i, sent.key, sent.value, plan, headers=headers)
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="small")
    parser.add_argument("--plans", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between batches")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    base = bench_stack()
    label = f"ApplyBatch_{uuid.uuid4().hex[:8]}"
    workload = build(args.workload, args.plans, GraphOptions(node_label=label))
    with graph_label(base, label), isolated(base, kafka=False) as settings:
        store = postgres_store(settings)
        graph = Neo4jGraphWriter(settings.neo4j)
        with started(store, graph):
            applier = build_applier(settings, store, graph)
            prepared = (*workload.warmup, *workload.setup)
            warm = messages(prepared, 0)
            for start in range(0, len(warm), args.batch):
                applier.apply(warm[start : start + args.batch])
            measured = messages(workload.plans, len(warm))
            batches = [
                measured[start : start + args.batch]
                for start in range(0, len(measured), args.batch)
            ]
            batch_ms: list[float] = []
            graph_ms: list[float] = []
            graph.apply = timed(graph.apply, graph_ms)  # type: ignore[method-assign]
            gc.collect()
            gc.freeze()  # the workload's plans are this process's, not an applier's: off the GC
            profile = cProfile.Profile(time.thread_time) if args.profile else None
            services = CpuWindow(CpuGroups(stack_pids(settings, [POSTGRES, NEO4J])))
            with counting() as counts:
                services.start()
                cpu = time.thread_time()
                if profile:
                    profile.enable()
                outcomes: Counter[str] = Counter()
                for batch in batches:
                    began = time.perf_counter()
                    outcomes.update(o.value for o in applier.apply(batch).values())
                    batch_ms.append((time.perf_counter() - began) * 1000)
                    time.sleep(args.pause)
                if profile:
                    profile.disable()
                cpu = time.thread_time() - cpu
                services.stop()
    plans = len(measured)
    print(f"outcomes: {dict(outcomes)}")
    print(
        f"{plans} plans in {len(batches)} batches: CPU {cpu * 1000 / plans:.3f} ms/plan "
        f"(thread), wall {sum(batch_ms) / plans:.3f} ms/plan (pauses left out); "
        f"PostgreSQL {services.spent[POSTGRES] * 1000 / plans:.3f}, "
        f"Neo4j {services.spent[NEO4J] * 1000 / plans:.3f} ms/plan"
    )
    print(
        f"per batch: {counts['postgres'] / len(batches):.1f} PostgreSQL statements, "
        f"{counts['neo4j'] / len(batches):.1f} Neo4j queries"
    )
    for what, times in (("a batch", batch_ms), ("its Neo4j write", graph_ms)):
        shown = " / ".join(f"{v:.1f}" for v in (*percentiles(times).values(), max(times)))
        print(f"{what}: p50 / p95 / p99 / max {shown} ms")
    for name, n in sorted(counts.items()):
        if name.startswith("pg: "):
            print(f"  {n / len(batches):5.1f} {name[4:]}")
    if profile:
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
