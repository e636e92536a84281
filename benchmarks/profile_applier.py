"""A profile of one applier process while it drains a backlog: where its CPU goes.

    python benchmarks/profile_applier.py [--workload small] [--plans 2000] [--out DIR]

Starts one applier (its relay beside it) on a run's own topics and schema, applies the warm-up,
then publishes ``--plans`` plans at once and records the applier with py-spy (``pip install
py-spy``; ``--native`` off: Python frames only) until every plan's COMPLETED event is read. Writes
``applier.speedscope.json`` and prints the heaviest leaf functions and our own functions by the
share of samples under them, beside the CPU per plan of each process group (``cpu.py``).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

from cpu import WORKERS, CpuGroups, CpuWindow, stack_pids, thread_cpu_s
from isolation import bench_stack, graph_label, isolated
from pipeline_run import running
from workloads import build

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.stack.process import start_bound

TOP = 30


def thread_names(raw: Path) -> dict[int, str]:
    """Python thread names by thread id, from py-spy's ``thread (<tid>): <name>`` frames."""
    names = {}
    for line in raw.read_text().splitlines():
        head = line.split(";", 1)[0]
        if head.startswith("thread (") and "): " in head:
            tid, name = head[len("thread (") :].split("): ", 1)
            names[int(tid)] = name
    return names


def summary(raw: Path) -> str:
    """Leaf functions and our functions (graph_ingest frames) by share of the samples."""
    leaves: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        samples = int(count)
        total += samples
        leaves[frames[-1]] += samples
        for frame in dict.fromkeys(f for f in frames if "graph_ingest" in f):
            ours[frame] += samples
    lines = [f"{total} samples", "leaf functions:"]
    lines += [f"  {n / total:6.1%} {f}" for f, n in leaves.most_common(TOP)]
    lines += ["our functions (inclusive):"]
    lines += [f"  {n / total:6.1%} {f}" for f, n in ours.most_common(TOP)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="small")
    parser.add_argument("--plans", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("build/bench/profile"))
    args = parser.parse_args()
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    base = bench_stack()
    args.out.mkdir(parents=True, exist_ok=True)
    label = f"Profile_{uuid.uuid4().hex[:8]}"
    workload = build(args.workload, args.plans, GraphOptions(node_label=label))
    raw = args.out / "applier.raw.txt"
    with (
        graph_label(base, label),
        isolated(base) as settings,
        running(settings, workload, appliers=1, logs=args.out / "logs") as run,
    ):
        (pid,) = run.applier_pids
        window = CpuWindow(CpuGroups({WORKERS: [pid], **stack_pids(settings)}))
        recorder = start_bound(
            [
                *(spy, "record", "--pid", str(pid), "--rate", "250", "--threads"),
                *("--format", "raw", "--output", str(raw), "--nonblocking"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        threads_before = thread_cpu_s(pid)
        window.start()
        run.publish(workload)
        spent = window.stop()
        threads = {
            tid: (name, cpu - threads_before.get(tid, (name, 0.0))[1])
            for tid, (name, cpu) in thread_cpu_s(pid).items()
        }
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        recorder.wait(timeout=60)
    per_plan = {g: f"{s * 1000 / len(workload.plans):.3f}" for g, s in spent.items()}
    print(f"CPU ms per plan: {per_plan}")
    python_names = thread_names(raw)
    print("applier threads, CPU ms per plan:")
    for tid, (name, cpu) in sorted(threads.items(), key=lambda t: -t[1][1]):
        if cpu > 0:
            shown = python_names.get(tid, name)
            print(f"  {cpu * 1000 / len(workload.plans):8.3f} {shown} ({tid})")
    print(summary(raw))


if __name__ == "__main__":
    main()
