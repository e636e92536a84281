"""What serving metrics costs each process (issue 19): scrape duration, size and CPU per scrape.

    python benchmarks/scrape_cost.py [--plans N] [--scrapes N] [--interval S]

One applier (with its relay), a planner, a projector and the API (``graph-ingest serve``) run on
the dev stack with ``--metrics-port``, after ``--plans`` small plans went through the applier
(so its histograms and the projector's tables hold something). Then each process is scraped
``--scrapes`` times, ``--interval`` seconds apart (Prometheus' default is 15 s; 1 s is harsher),
and the same time is spent idle first: CPU per scrape is the process's CPU (user + system, from
/proc) while scraped minus while idle, divided by the scrapes. The consumer lag and store gauges
are read at scrape time and cached ``SCRAPE__CACHE_S``: at a 1 s interval about one scrape in
five reads Kafka or PostgreSQL, so the figures include those reads. Prints a table; no assertion.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from isolation import bench_stack, graph_label, isolated
from pipeline_run import running, worker_processes
from workloads import build

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import pipeline_env
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA

LOGS = Path("build/bench/logs")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (its reaped children included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def scrape(port: int) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        body = response.read()
    return time.perf_counter() - started, body


@contextmanager
def serving_api(settings: Settings, port: int) -> Iterator[int]:
    """``graph-ingest serve`` on ``port`` for the block; yields its pid once it answers."""
    env = {**os.environ, **pipeline_env(settings)}
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / "scrape-cost-api.log").open("wb") as out:
        process = start_bound(
            [sys.executable, "-m", "graph_ingest.cli.main", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


def measure(pid: int, port: int, scrapes: int, interval_s: float) -> dict[str, float]:
    """Scrape ``port`` ``scrapes`` times; duration, size, samples and CPU per scrape."""
    wait_until(lambda: _answers(port), timeout_s=120, what=f"/metrics on {port}")
    idle_start = cpu_s(pid)
    time.sleep(scrapes * interval_s)
    idle = cpu_s(pid) - idle_start
    durations, sizes, samples = [], [], 0
    busy_start = cpu_s(pid)
    for _ in range(scrapes):
        started = time.monotonic()
        duration, body = scrape(port)
        durations.append(duration)
        sizes.append(len(body))
        samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    busy = cpu_s(pid) - busy_start
    durations.sort()
    return {
        "p50_ms": statistics.median(durations) * 1000,
        "p90_ms": durations[int(len(durations) * 0.9)] * 1000,
        "max_ms": durations[-1] * 1000,
        "bytes": statistics.median(sizes),
        "samples": samples,
        "cpu_ms_per_scrape": max(0.0, busy - idle) / scrapes * 1000,
    }


def _answers(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    base = bench_stack()
    label = f"Bench_scrape_{uuid.uuid4().hex[:8]}"
    workload = build("small", args.plans, GraphOptions(node_label=label))
    ports = {kind: free_port() for kind in ("applier", "planner", "projector", "api")}
    pids: dict[str, int] = {}
    with graph_label(base, label), isolated(base) as settings, ExitStack() as stack:
        run = stack.enter_context(
            running(
                settings,
                workload,
                appliers=1,
                logs=LOGS,
                GRAPH_INGEST_METRICS__PORT=str(ports["applier"]),
            )
        )
        pids["applier"] = run.applier_pids[0]
        for kind in ("planner", "projector"):
            (process,) = stack.enter_context(
                worker_processes(
                    settings,
                    kind,
                    1,
                    LOGS,
                    GRAPH_INGEST_METRICS__PORT=str(ports[kind]),
                    GRAPH_INGEST_PLANNER__GRAPH_SCHEMA=str(BUNDLED_GRAPH_SCHEMA),
                )
            )
            pids[kind] = process.pid
        pids["api"] = stack.enter_context(serving_api(settings, ports["api"]))
        run.publish(workload)
        figures = {
            kind: measure(pids[kind], ports[kind], args.scrapes, args.interval) for kind in ports
        }
    print(
        f"\nscrape cost, {args.scrapes} scrapes {args.interval:g} s apart per process "
        f"(after {args.plans} small plans)"
    )
    print(
        f"{'process':<10} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} {'bytes':>8} {'samples':>8} {'CPU ms/scrape':>14}"
    )
    for kind, f in figures.items():
        print(
            f"{kind:<10} {f['p50_ms']:>8.1f} {f['p90_ms']:>8.1f} {f['max_ms']:>8.1f} "
            f"{f['bytes']:>8.0f} "
            f"{f['samples']:>8.0f} {f['cpu_ms_per_scrape']:>14.1f}"
        )


if __name__ == "__main__":
    main()
