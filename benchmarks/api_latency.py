"""Latency of ``GET /api/v1/operations/{id}`` under concurrent clients (issue 18's figure).

    python benchmarks/api_latency.py [--operations N] [--clients C] [--requests R]

Folds N operations (each its whole PREPARED -> COMPLETED history) into the read tables of a
schema of its own, starts ``graph-ingest serve`` on a free port of 127.0.0.1, then C client
threads, each on one keep-alive connection, ask for random operations: a warm-up of
``WARM_UP`` requests each, then R measured ones (a bounded loop: C x R requests in all). Prints
p50, p90, p99 and max of the measured requests, and the rate they were served at. Every answer
must be a 200 with the operation asked for, else the run fails. The clients share one Python
process with the GIL, so the figures include their own overhead: an upper bound of the server's.

Uses the stack that ``Settings()`` describes, started if needed (GRAPH_INGEST_STACK__* moves it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from isolation import isolated

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import stack_env
from graph_ingest.stack.manager import LocalStack
from graph_ingest.stack.process import start_bound

REPO = Path(__file__).resolve().parents[1]
WARM_UP = 20
FOLD_BATCH = 500
PATH = [Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED]


def histories(count: int) -> Iterator[list[Operation]]:
    """``count`` operations, each as its snapshots from PREPARED to COMPLETED."""
    start = datetime.now(UTC) - timedelta(hours=1)
    for i in range(count):
        at = start + timedelta(milliseconds=i)
        snapshot = Operation.prepared(
            operation_id=f"op_bench_{i:08d}",
            space="bench",
            document_id=f"doc-{i}",
            expected_revision=0,
            fingerprint=f"sha256:{i:064x}",
            at=at,
        )
        snapshots = [snapshot]
        for stage in PATH:
            snapshot = snapshot.transition(stage, at)
            snapshots.append(snapshot)
        yield snapshots


def fill(settings: Settings, count: int) -> list[str]:
    """Fold ``count`` operations into the read tables; their ids."""
    tables = ReadTables(settings.postgres)
    tables.start()
    ids: list[str] = []
    events: list[OperationEvent] = []
    try:
        for snapshots in histories(count):
            ids.append(snapshots[0].operation_id)
            events.extend(OperationEvent("bench", 0, len(events), s) for s in snapshots)
            if len(events) >= FOLD_BATCH:
                tables.fold(events)
                events = []
        if events:
            tables.fold(events)
    finally:
        tables.close()
    return ids


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(settings: Settings) -> Iterator[int]:
    """``graph-ingest serve`` on a free port for the block; the port, once it answers."""
    port = free_port()
    env = {
        **os.environ,
        **stack_env(settings),
        "GRAPH_INGEST_POSTGRES__SCHEMA_NAME": settings.postgres.schema_name,
    }
    command = [sys.executable, "-m", "graph_ingest.cli.main", "serve", "--port", str(port)]
    process = start_bound(command, cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("graph-ingest serve did not start")
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=60)


def _answers(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health/live")
        return connection.getresponse().status == 200
    except OSError:
        return False


def client(port: int, ids: list[str], requests: int, latencies: list[float]) -> None:
    """One client on one keep-alive connection: warm up, then time ``requests`` GETs."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    chooser = random.Random()
    for i in range(WARM_UP + requests):
        operation_id = chooser.choice(ids)
        started = time.perf_counter()
        connection.request("GET", f"/api/v1/operations/{operation_id}")
        response = connection.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200 or json.loads(body)["operation_id"] != operation_id:
            raise RuntimeError(f"{operation_id}: {response.status} {body[:200]!r}")
        if i >= WARM_UP:
            latencies.append(elapsed)
    connection.close()


def load(port: int, ids: list[str], clients: int, requests: int) -> tuple[list[float], float]:
    """Every client's measured latencies, and the wall time of the whole run."""
    per_client: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def run(latencies: list[float]) -> None:
        try:
            client(port, ids, requests, latencies)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(mine,)) for mine in per_client]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return [latency for mine in per_client for latency in mine], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200, help="measured, per client")
    args = parser.parse_args()
    base = Settings()
    LocalStack(base).up()
    with isolated(base, kafka=False) as settings:
        ids = fill(settings, args.operations)
        with serving(settings) as port:
            latencies, wall = load(port, ids, args.clients, args.requests)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"GET /api/v1/operations/{{id}}, {args.operations:,} operations, {args.clients} clients"
        f" x {args.requests} requests: p50 {cuts[49] * 1000:.1f} ms, p90 {cuts[89] * 1000:.1f}"
        f" ms, p99 {cuts[98] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms;"
        f" {len(latencies) / wall:,.0f} requests/s"
    )


if __name__ == "__main__":
    main()
