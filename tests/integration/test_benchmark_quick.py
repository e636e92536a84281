"""The throughput benchmark cannot rot: its ``--quick`` mode runs once against the test stack.

The benchmark checks, after every run, that every plan COMPLETED and that the graph holds exactly
the plans' nodes and edges (it exits non-zero otherwise); it never asserts a rate, nor does this.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {"small", "large", "hot", "updates"}
METHODS = {
    "ceiling",
    "seed-style",
    "pipeline x1",
    "pipeline x2",
    "pipeline x1 trickle",
    "pipeline x1 paced",
}
LATENCY_METHODS = {"pipeline x1 trickle", "pipeline x1 paced"}  # quick: on small only
STACK_GROUPS = {"kafka", "neo4j", "postgres"}
# Whose CPU each way counts: its own client, or the worker processes, and the services it uses
CPU_GROUPS = {
    "ceiling": {"client", "neo4j"},
    "seed-style": {"client", "neo4j", "postgres"},
    **{m: {"workers", *STACK_GROUPS} for m in METHODS if m.startswith("pipeline")},
}
IDLE_GROUPS = {"applier", "planner", "projector", *STACK_GROUPS}
JVM_GROUPS = {"kafka", "neo4j"}
# How far a window's JIT may come out above its JVM's total: the total is read in clock ticks
# (utime and stime, each truncated: 2 ticks), the JIT threads' in nanoseconds that lag by up to a
# scheduler tick (<= 1 clock tick) for each compiler thread that is running (two on two cores)
JIT_OVER_TOTAL_SLACK_S = 4 / os.sysconf("SC_CLK_TCK")


def test_the_quick_benchmark_applies_every_workload_every_way_exactly(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    # When the benchmark runs in quick mode against the test stack
    result = subprocess.run(
        [sys.executable, "benchmarks/throughput.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, **stack_env},
        capture_output=True,
        text=True,
        timeout=840,
    )
    # Then it succeeds: every run's plans completed and its graph was exact
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    # and it measured every workload, the three scale points included, every way
    report = json.loads((tmp_path / "throughput.json").read_text())
    runs = {(r["workload"], r["method"]) for r in report["runs"]}
    workloads = {w for w, _ in runs}
    assert workloads - WORKLOADS == {"scale-2", "scale-20", "scale-100"}
    throughput = {(w, m) for w in workloads for m in METHODS if m not in LATENCY_METHODS}
    assert runs == throughput | {("small", m) for m in LATENCY_METHODS}
    # and counted the CPU of every process group of every run, whose total is some CPU
    for run in report["runs"]:
        spent = run["cpu_s"]
        assert set(spent) == CPU_GROUPS[run["method"]], run
        assert all(isinstance(s, float) and s >= 0 for s in spent.values()), run
        assert sum(spent.values()) > 0, run
        assert run["cpu_ms_per_plan"]["total"] > 0, run
        # and, of its JVM services' CPU, what their JIT compilers spent
        jit = run["jit_s"]
        assert set(jit) == CPU_GROUPS[run["method"]] & JVM_GROUPS, run
        assert all(0 <= jit[group] <= spent[group] + JIT_OVER_TOTAL_SLACK_S for group in jit), run
    # and the idle pipeline's, for each worker and service
    idle = report["idle"]
    assert set(idle["cpu_s"]) == IDLE_GROUPS
    assert idle["seconds"] > 0 and all(s >= 0 for s in idle["cpu_s"].values())
    # and how warm the stack's JVMs were: each has compiled since it started, and that is a part
    # of its CPU, not more
    lifetimes = report["stack_jvms"]
    assert set(lifetimes) == JVM_GROUPS
    assert all(
        0 < life["jit_s"] < life["cpu_s"] and life["age_s"] > 0 for life in lifetimes.values()
    )
    assert "stack JVMs since they started: kafka up" in result.stdout
    # and printed the tables, and drew the chart where matplotlib (the bench extra) is installed
    assert "pipeline x2" in result.stdout
    assert "efficiency" in result.stdout and "idle pipeline" in result.stdout
    # with, per pipeline run, the efficiency its services alone allow: the ceiling's CPU per plan
    # over the run's without the workers' share
    by_run = {(r["workload"], r["method"]): r["cpu_ms_per_plan"] for r in report["runs"]}
    small, ceiling = by_run[("small", "pipeline x1")], by_run[("small", "ceiling")]
    cpu_table = result.stdout.split("CPU ms per plan, summed")[1]
    row = next(
        line
        for line in cpu_table.splitlines()
        if line.startswith(f"{'small':<12} {'pipeline x1':<20} ")
    )
    assert row.split()[-3] == f"{ceiling['total'] / (small['total'] - small['workers']):.2f}", row
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "throughput.png").stat().st_size > 0
