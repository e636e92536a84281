"""The benchmark's outputs: a table on stdout, ``throughput.json`` and ``throughput.png``."""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpu import CLIENT, JVM_SERVICES, KAFKA, NEO4J, POSTGRES, STACK_SERVICES, WORKERS
from idle import IdleCost
from results import CEILING, LATENCY_METHODS, METHODS, PACED, PIPELINE_1, SEED_STYLE, Run

log = logging.getLogger("throughput")

HEADER = (
    f"{'workload':<12} {'method':<12} {'plans':>6} {'elements/s':>11} {'plans/s':>9} "
    f"{'/ceiling':>8} {'/seed':>6}  {'p50/p95/p99 ms (paced)':<28} {'RSS MiB':>7} "
    f"{'PG B/plan':>9}"
)


def row(run: Run, methods: dict[str, Run]) -> str:
    ceiling, seed, paced = (methods.get(m) for m in (CEILING, SEED_STYLE, PACED))
    vs_ceiling = f"{run.elements_per_s / ceiling.elements_per_s:.1%}" if ceiling else "-"
    vs_seed = f"{run.plans_per_s / seed.plans_per_s:.1f}x" if seed else "-"
    latency = "-"
    if run.method == PIPELINE_1 and paced and paced.latency_ms and paced.paced_plans_per_s:
        p = paced.latency_ms
        latency = f"{p['p50']:.0f}/{p['p95']:.0f}/{p['p99']:.0f} @ {paced.paced_plans_per_s:.0f}/s"
    rss = f"{run.peak_rss_bytes / 2**20:.0f}" if run.peak_rss_bytes else "-"
    pg = f"{run.pg_bytes_per_plan:.0f}" if run.pg_bytes_per_plan is not None else "-"
    return (
        f"{run.workload:<12} {run.method:<12} {run.plans:>6} {run.elements_per_s:>11.0f} "
        f"{run.plans_per_s:>9.1f} {vs_ceiling:>8} {vs_seed:>6}  {latency:<28} {rss:>7} {pg:>9}"
    )


def by_method(runs: Sequence[Run], workload: str) -> dict[str, Run]:
    return {r.method: r for r in runs if r.workload == workload}


def rows(runs: Sequence[Run]) -> list[Run]:
    """The throughput runs, by workload then method (the paced run shows in pipeline x1's)."""
    out = []
    for workload in dict.fromkeys(r.workload for r in runs):
        methods = by_method(runs, workload)
        out += [methods[m] for m in METHODS if m in methods]
    return out


def table(runs: Sequence[Run]) -> str:
    lines = [HEADER]
    lines += [row(run, by_method(runs, run.workload)) for run in rows(runs)]
    return "\n".join(lines)


CPU_GROUPS = (CLIENT, WORKERS, KAFKA, NEO4J, POSTGRES)
CPU_HEADER = (
    f"{'workload':<12} {'method':<20} "
    + " ".join(f"{g:>8}" for g in CPU_GROUPS)
    + f" {'total':>8} {'efficiency':>10} {'no workers':>10} {'JIT k/n':>11}"
    + f"  {'event p50/p95/p99 ms':<22}"
)


def cpu_row(run: Run, ceiling: Run | None) -> str:
    per_plan = run.cpu_ms_per_plan or {}
    groups = " ".join(f"{per_plan[g]:>8.3f}" if g in per_plan else f"{'-':>8}" for g in CPU_GROUPS)
    total = per_plan.get("total")
    ceiling_total = (ceiling.cpu_ms_per_plan or {}).get("total") if ceiling else None
    efficiency = f"{ceiling_total / total:.2f}" if total and ceiling_total else "-"
    # What the services alone allow: the efficiency if the workers cost nothing at all.
    services = total - per_plan[WORKERS] if total and WORKERS in per_plan else None
    bound = f"{ceiling_total / services:.2f}" if services and ceiling_total else "-"
    events = run.details.get("event_latency_ms")
    latency = f"{events['p50']:.0f}/{events['p95']:.0f}/{events['p99']:.0f}" if events else "-"
    return (
        f"{run.workload:<12} {run.method:<20} {groups} "
        f"{total if total is not None else 0:>8.3f} {efficiency:>10} {bound:>10} "
        f"{jit_cell(run):>11}  {latency:<22}"
    )


def jit_cell(run: Run) -> str:
    """Kafka's and Neo4j's JIT compilers' CPU ms per plan, of their columns ("-": not counted)."""
    jit = run.jit_ms_per_plan or {}
    return "/".join(f"{jit[g]:.2f}" if g in jit else "-" for g in JVM_SERVICES)


def cpu_table(runs: Sequence[Run]) -> str:
    """CPU ms per plan of every process group (``cpu.py``), efficiency = the ceiling's total ÷
    the run's, "no workers" = the ceiling's total ÷ Kafka's, Neo4j's and PostgreSQL's: the most
    any change to the workers could reach, and "JIT k/n" = of Kafka's and Neo4j's, what their JIT
    compilers spent (warm-up, not work). The latency runs add their publish→COMPLETED-event
    percentiles."""
    lines = ["CPU ms per plan, summed over each group's processes", CPU_HEADER]
    for workload in dict.fromkeys(r.workload for r in runs):
        methods = by_method(runs, workload)
        for method in (*METHODS, *LATENCY_METHODS):
            if method in methods:
                lines.append(cpu_row(methods[method], methods.get(CEILING)))
    return "\n".join(lines)


def idle_table(idle: IdleCost) -> str:
    """% of one core each process spent with nothing to do."""
    shares = idle.percent_of_a_core
    workers = sum(v for g, v in shares.items() if g not in STACK_SERVICES)
    cells = ", ".join(f"{g} {v:.2f} %" for g, v in shares.items())
    return (
        f"idle pipeline over {idle.seconds:.0f} s, % of one core: {cells}; "
        f"workers together {workers:.2f} %"
    )


def jvm_lifetimes_line(lifetimes: dict[str, dict[str, float]]) -> str:
    """How warm the stack's JVMs were: their JIT compilers' share of all their CPU so far."""
    cells = ", ".join(
        f"{name} up {life['age_s']:,.0f} s, {life['cpu_s']:.1f} s CPU of which JIT "
        f"{life['jit_s']:.1f} s ({life['jit_s'] / life['cpu_s']:.0%})"
        for name, life in lifetimes.items()
    )
    return f"stack JVMs since they started: {cells}"


def machine() -> dict[str, Any]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_json(path: Path, runs: Sequence[Run], meta: dict[str, Any]) -> None:
    document = {**meta, "machine": machine(), "runs": [r.as_dict() for r in runs]}
    path.write_text(json.dumps(document, indent=2) + "\n")


def write_chart(path: Path, runs: Sequence[Run]) -> bool:
    """The scale curve (ms per plan against plans applied) beside bars of elements/s per
    workload and method. False when matplotlib is not installed (the ``bench`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -e '.[bench]'): no chart")
        return False
    shown = rows(runs)
    figure, (curve, bars) = plt.subplots(1, 2, figsize=(14, 5))
    scale = [r for r in shown if r.workload.startswith("scale-")]
    for method in METHODS:
        points = sorted((r.plans, 1000 / r.plans_per_s) for r in scale if r.method == method)
        if points:
            curve.plot(*zip(*points, strict=True), marker="o", label=method)
    curve.set(xlabel="plans (10 nodes + 10 edges each)", ylabel="ms per plan")
    curve.set_title("scale: cost per plan as the graph and tables grow")
    if scale:
        curve.set_xscale("log")
        curve.legend()
    else:
        curve.text(0.5, 0.5, "no scale runs", ha="center", transform=curve.transAxes)
    workloads = list(dict.fromkeys(r.workload for r in shown))
    width = 0.8 / len(METHODS)
    for index, method in enumerate(METHODS):
        values = [by_method(runs, w).get(method) for w in workloads]
        bars.bar(
            [x + index * width for x in range(len(workloads))],
            [r.elements_per_s if r else 0 for r in values],
            width,
            label=method,
        )
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))], workloads)
    bars.set(ylabel="elements/s (nodes + edges)", title="throughput per workload")
    bars.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
