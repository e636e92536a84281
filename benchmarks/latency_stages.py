"""Where a lone plan's time goes: a trickle of plans (one at a time) through one applier, and
the latency of each leg of its journey, from the stage times the applier stores.

    python benchmarks/latency_stages.py [--workload small|hot|...] [--plans N] [--rate R]
                                        [--timeline]

Legs, per operation (p50 / p95 / p99 ms): publish → PREPARED (Kafka delivery, waiting for the
batch before it, the batch's formation and decode), PREPARED → GRAPH_APPLIED (the admission's
commit and the Neo4j write), GRAPH_APPLIED → COMPLETED (the state commit), COMPLETED → its event
read from the operations topic (the commit, the relay and Kafka). The stage times are the
applier's clock when it decided each stage, so a leg ends before its commit does; publish → event
is the whole journey. Then the CPU ms per plan of each process group over the trickle
(``cpu.py``): at a trickle the fixed costs per batch and per relay pass show.

``--timeline``: also each second of the run (by publish time), the slowest plan's time in each
leg: a queue that builds behind a slow moment shows as a run of growing rows, and the leg where
it builds says which step fell behind (``--rate 200 --plans 4000`` found the registry lookup's
stale plan of issue 20 that way).
"""

from __future__ import annotations

import argparse
import itertools
import logging
from datetime import datetime
from pathlib import Path

from cpu import WORKERS, CpuGroups, CpuWindow, stack_pids
from isolation import bench_stack, graph_label, isolated, sql
from pipeline_run import running
from results import percentiles
from workloads import build

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.stages import Stage

# STATE_COMMITTED and COMPLETED are stamped in the same transaction: one point is enough.
POINTS = ("publish", Stage.PREPARED, Stage.GRAPH_APPLIED, Stage.COMPLETED, "event")
WHOLE = "publish → event"


LEGS = (*(f"{a} → {b}" for a, b in itertools.pairwise(POINTS)), WHOLE)


def journeys(
    sent: dict[str, float], stages: dict[str, dict[str, str]], events: dict[str, float]
) -> dict[str, list[float]]:
    """Each operation's ms in every leg (``LEGS`` order): ``sent`` and ``events`` are epoch
    seconds by operation, ``stages`` the stage times as stored (ISO 8601)."""
    found = {}
    for op, at in sent.items():
        stamped = [datetime.fromisoformat(stages[op][stage]).timestamp() for stage in POINTS[1:-1]]
        times = [at, *stamped, events[op]]
        steps = [(end - start) * 1000 for start, end in itertools.pairwise(times)]
        found[op] = [*steps, (events[op] - at) * 1000]
    return found


def print_timeline(sent: dict[str, float], journey: dict[str, list[float]]) -> None:
    """Per second of publishing, how many plans left and the slowest one's ms in each leg."""
    start = min(sent.values())
    by_second: dict[int, list[list[float]]] = {}
    for op, at in sent.items():
        by_second.setdefault(int(at - start), []).append(journey[op])
    print("second  plans  slowest ms per leg: " + " | ".join(LEGS))
    for second, rows in sorted(by_second.items()):
        slowest = " ".join(f"{max(leg):9.0f}" for leg in zip(*rows, strict=True))
        print(f"{second:6d} {len(rows):6d}  {slowest}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", default="small")
    parser.add_argument("--plans", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20.0, help="plans/s (default 20)")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument(
        "--timeline", action="store_true", help="also the slowest plan per leg, second by second"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    base = bench_stack()
    label = f"Bench_latency_{args.workload}"
    workload = build(args.workload, args.plans, GraphOptions(node_label=label))
    with graph_label(base, label), isolated(base) as settings:
        with running(settings, workload, appliers=1, logs=args.out / "logs") as run:
            window = CpuWindow(CpuGroups({WORKERS: run.applier_pids, **stack_pids(settings)}))
            window.start()
            sent, _ = run.publish(workload, args.rate)
            window.stop()
        stages = dict(sql(settings, "SELECT operation_id, stage_times FROM operations"))
    journey = journeys(sent, stages, run.events.seen)
    if args.timeline:
        print_timeline(sent, journey)
    print(f"{args.workload}: {len(sent)} plans at {args.rate:g}/s, one applier")
    print(f"{'leg':<34} {'p50':>7} {'p95':>7} {'p99':>7}   ms")
    for name, values in zip(LEGS, zip(*journey.values(), strict=True), strict=True):
        p = percentiles(list(values))
        print(f"{name:<34} {p['p50']:7.1f} {p['p95']:7.1f} {p['p99']:7.1f}")
    per_plan = {group: spent * 1000 / len(sent) for group, spent in window.spent.items()}
    cells = ", ".join(f"{group} {ms:.2f}" for group, ms in per_plan.items())
    jit = ", ".join(f"{group} {s * 1000 / len(sent):.2f}" for group, s in window.jit_spent.items())
    print(f"CPU ms per plan: {cells}; total {sum(per_plan.values()):.2f} (of it JIT: {jit})")


if __name__ == "__main__":
    main()
