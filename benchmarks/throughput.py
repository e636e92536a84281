"""Apply throughput (issue 8): each workload applied three ways on the same data, in one process
and one stack, next to each other.

    python benchmarks/throughput.py [--workload small|large|hot|updates|scale|all]... [--plans N]
                                    [--paced-plans N] [--quick] [--out DIR]

* ``ceiling``: the workload's nodes and edges written with the driver alone, the fast way
  (``ceiling.py``): the figure everything is divided by;
* ``seed-style``: one plan at a time through the project's applier, store and writer: three
  PostgreSQL commits and one Neo4j transaction per plan, no Kafka (``seed_style.py``);
* ``pipeline x1`` / ``x2``: end to end, from publishing on the plans topic to every operation
  COMPLETED and its event on the operations topic, with one and then two applier processes in
  one group (``pipeline_run.py``); then one applier again with the producer paced at 50 % of the
  x1 rate, for publish→COMPLETED latency percentiles (at most ``LATENCY_SECONDS`` of plans).

Workloads (``workloads.py``): ``small`` 10 nodes + 10 edges a plan (default 1,000 plans);
``large`` 1,000 + 1,000 (20); ``hot`` half of all edges touch 20 shared nodes (1,000); ``updates``
the second version of each small document, measured after the first (1,000); ``scale`` small
plans at N/50, N/5 and N (N = 50,000): the cost per plan as the graph and tables grow. ``--plans``
sets N of every workload chosen. Each run gets its own topics, schema and consumer group, and
checks that every plan COMPLETED and the graph holds exactly what the plans say (``--quick``: small
counts, a few seconds of work each, the latency runs of ``small`` only, and nothing but those
checks; it never asserts a rate).

Uses the stack that ``Settings()`` describes, started if needed (GRAPH_INGEST_STACK__* moves it).
Prints a table; writes ``throughput.json`` and ``throughput.png`` (matplotlib: the ``bench``
extra) into ``--out``. PG B/plan: growth of the schema's tables (pg_total_relation_size) per
measured plan. RSS: peak (VmHWM) of the applier process, the larger of two.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path

from ceiling import ceiling, rust_extension
from cpu import jvm_lifetimes
from idle import idle_cost
from isolation import bench_stack, graph_label, wipe_label
from pipeline_run import pipeline
from report import cpu_table, idle_table, jvm_lifetimes_line, table, write_chart, write_json
from results import TRICKLE, Run
from seed_style import seed_style
from workloads import Workload, build

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.settings import Settings

log = logging.getLogger("throughput")

WORKLOADS = ("small", "large", "hot", "updates", "scale")
DEFAULT_PLANS = {"small": 1000, "large": 20, "hot": 1000, "updates": 1000, "scale": 50_000}
QUICK_PLANS = {"small": 30, "large": 2, "hot": 30, "updates": 20, "scale": 100}
LATENCY_SECONDS = 30.0
LATENCY_MIN_PLANS = 100
# The trickle: plans one at a time, at most this rate (a quarter of the backlog rate if lower)
TRICKLE_PLANS_PER_S = 20.0
TRICKLE_SECONDS = 15.0
QUICK_LATENCY_WORKLOAD = "small"
IDLE_SECONDS = 20.0
QUICK_IDLE_SECONDS = 2.0


def cases(kind: str, count: int) -> list[tuple[str, int]]:
    """(workload, plans) of each case: the scale curve is three."""
    if kind == "scale":
        return [("scale", max(1, count // 50)), ("scale", max(1, count // 5)), ("scale", count)]
    return [(kind, count)]


def measure(
    base: Settings, workload: Workload, *, quick: bool, logs: Path, paced_plans: int | None
) -> list[Run]:
    """Every way on ``workload``; its label is emptied after each run."""
    label = workload.graph.node_label
    runs: list[Run] = []

    def done(run: Run) -> Run:
        log.info(
            "%s %s: %.1f plans/s, %.0f elements/s",
            run.workload,
            run.method,
            run.plans_per_s,
            run.elements_per_s,
        )
        wipe_label(base, label)
        runs.append(run)
        return run

    done(ceiling(base, workload, quick=quick))
    done(seed_style(base, workload))
    one = done(pipeline(base, workload, appliers=1, logs=logs))
    done(pipeline(base, workload, appliers=2, logs=logs))
    if quick and workload.name != QUICK_LATENCY_WORKLOAD:
        return runs  # the latency runs' code is the same for every workload: once is enough
    trickle = min(TRICKLE_PLANS_PER_S, one.plans_per_s / 4)
    count = max(LATENCY_MIN_PLANS, round(trickle * TRICKLE_SECONDS))
    done(
        pipeline(
            base,
            workload.prefix(count),
            appliers=1,
            logs=logs,
            rate=trickle,
            latency_method=TRICKLE,
        )
    )
    rate = one.plans_per_s / 2
    count = paced_plans or max(LATENCY_MIN_PLANS, round(rate * LATENCY_SECONDS))
    done(pipeline(base, workload.prefix(count), appliers=1, logs=logs, rate=rate))
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workload",
        choices=[*WORKLOADS, "all"],
        action="append",
        help="a workload to measure (repeat for several; default: all)",
    )
    parser.add_argument("--plans", type=int, help="plans of each workload chosen (N of scale)")
    parser.add_argument("--quick", action="store_true", help="small counts; checks only")
    parser.add_argument(
        "--paced-plans",
        type=int,
        help="plans of the half-load run (default: 30 s of them): e.g. 10000 to look for stalls",
    )
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    args = parser.parse_args(argv)
    base = bench_stack()
    args.out.mkdir(parents=True, exist_ok=True)
    counts = QUICK_PLANS if args.quick else DEFAULT_PLANS
    chosen = args.workload or ["all"]
    kinds = WORKLOADS if "all" in chosen else tuple(dict.fromkeys(chosen))
    tag = uuid.uuid4().hex[:8]
    started = time.time()
    runs: list[Run] = []
    for kind in kinds:
        for name, count in cases(kind, args.plans or counts[kind]):
            label = f"Bench_{name}_{count}_{tag}"
            workload = build(name, count, GraphOptions(node_label=label))
            with graph_label(base, label):
                runs += measure(
                    base,
                    workload,
                    quick=args.quick,
                    logs=args.out / "logs",
                    paced_plans=args.paced_plans,
                )
    idle = idle_cost(
        base, QUICK_IDLE_SECONDS if args.quick else IDLE_SECONDS, logs=args.out / "logs"
    )
    print(table(runs))
    print()
    print(cpu_table(runs))
    print()
    print(idle_table(idle))
    lifetimes = jvm_lifetimes(base)
    print(jvm_lifetimes_line(lifetimes))
    meta = {
        "command": " ".join(["python", "benchmarks/throughput.py", *(argv or sys.argv[1:])]),
        "started_at": started,
        "quick": args.quick,
        "neo4j_driver": version("neo4j"),
        "neo4j_rust_ext": rust_extension(),
        "batch_max_plans": base.applier.batch_max_plans,
        "idle": idle.as_dict(),
        "stack_jvms": lifetimes,
    }
    write_json(args.out / "throughput.json", runs, meta)
    charted = write_chart(args.out / "throughput.png", runs)
    print(f"\nwrote {args.out / 'throughput.json'}" + (" and throughput.png" if charted else ""))


if __name__ == "__main__":
    main()
