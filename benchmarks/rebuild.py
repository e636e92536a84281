"""Rebuild time: `projections rebuild` of N operations (each PREPARED, GRAPH_APPLIED,
STATE_COMMITTED, COMPLETED: four snapshots), from offset zero to the switch.

    python benchmarks/rebuild.py [--operations 50000]

Uses the stack that ``Settings()`` describes (started if needed; point it at another stack with
GRAPH_INGEST_STACK__* variables). The run gets its own topics and schemas. The operations topic
is filled first and folded by a projector (its rate is printed too: the live tables the rebuild
compares with); then the clock runs over ``Rebuild.run``: fold, catch-up, compare, switch.
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer
from isolation import isolated

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.lag import LagState
from graph_ingest.projections.lag_reader import operations_lag
from graph_ingest.projections.rebuild import Rebuild
from graph_ingest.projections.tables import ReadTables
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.wiring import run_projector

PATH = (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED)
START = datetime(2026, 12, 1, tzinfo=UTC)


def fill(settings: Settings, operations: int) -> int:
    """Every snapshot of ``operations`` completed operations on the operations topic; how many."""
    producer = Producer({**settings.kafka.producer_config(), "linger.ms": 20})
    sent = 0
    for i in range(operations):
        operation = Operation.prepared(
            operation_id=f"op-{i:06d}",
            space="bench",
            document_id=f"doc-{i % 1000}",
            expected_revision=0,
            fingerprint=f"fp-{i}",
            at=START,
        )
        for step, stage in enumerate((None, *PATH)):
            if stage is not None:
                operation = operation.transition(stage, START + timedelta(seconds=step))
            value = encode_operation(operation)
            while True:
                try:
                    producer.produce(
                        settings.topics.operations, key=operation.operation_id.encode(), value=value
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            sent += 1
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the operations topic was not filled in time")
    return sent


def fold_live(settings: Settings) -> float:
    """Seconds a projector takes to fold the whole topic into the live tables."""
    stop = threading.Event()
    started = time.monotonic()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    projector.start()
    tables = ReadTables(settings.postgres)
    tables.start()
    try:
        while operations_lag(settings, tables).state is not LagState.IDLE:
            if not projector.is_alive():
                raise RuntimeError("the projector stopped")
            time.sleep(1)
        return time.monotonic() - started
    finally:
        stop.set()
        projector.join(timeout=60)
        tables.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=50_000)
    args = parser.parse_args()
    base = Settings()
    LocalStack(base).up()
    with isolated(base) as settings:
        events = fill(settings, args.operations)
        live_s = fold_live(settings)
        print(f"projector: {events:,} events in {live_s:.1f} s ({events / live_s:,.0f} events/s)")
        started = time.monotonic()
        outcome = Rebuild(settings, wait_live_s=120).run(threading.Event())
        rebuild_s = time.monotonic() - started
        if not outcome.switched:
            raise RuntimeError(f"not switched: {outcome}")
        print(
            f"rebuild of {args.operations:,} operations ({outcome.folded:,} events): "
            f"{rebuild_s:.1f} s ({outcome.folded / rebuild_s:,.0f} events/s), compared "
            f"{', '.join(f'{t.table} {t.live.rows if t.live else 0:,} rows' for t in outcome.tables)}"
            ", switched"
        )


if __name__ == "__main__":
    main()
