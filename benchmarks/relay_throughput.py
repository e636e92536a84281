"""Outbox relay throughput: rows/s one relay publishes (produced, acknowledged and marked).

    python benchmarks/relay_throughput.py [--rows 20000] [--batch 500] [--value-bytes 512] [--runs 3]

Uses the stack that ``Settings()`` describes (started if needed; point it at another stack with
GRAPH_INGEST_STACK__* variables). Each run gets its own schema and operations topic, filled before
the clock starts; the time runs from the relay's first round to an empty backlog, so it includes
taking the relay lock once.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from graph_ingest.kafka.admin import TopicSpec, create_topics, delete_topics
from graph_ingest.producers.relay import OutboxRelay
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.store.migrate import migrate

OPERATIONS = 1000


@contextmanager
def isolated(base: Settings, batch: int) -> Iterator[Settings]:
    tag = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topics": base.topics.model_copy(update={"operations": f"bench.{tag}.operations"}),
            "postgres": base.postgres.model_copy(update={"schema_name": f"bench_{tag}"}),
            "relay": base.relay.model_copy(update={"batch_size": batch}),
        }
    )
    create_topics(
        settings,
        [TopicSpec(settings.topics.operations, partitions=settings.topics.operation_partitions)],
    )
    migrate(settings.postgres)
    try:
        yield settings
    finally:
        delete_topics(settings, [settings.topics.operations])
        with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {settings.postgres.schema_name} CASCADE")


def fill_outbox(settings: Settings, rows: int, value_bytes: int) -> None:
    """``rows`` events spread over OPERATIONS operations, sequences ascending per operation."""
    padding = b"x" * value_bytes
    with (
        psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn,
        conn.cursor() as cur,
        cur.copy(
            "COPY outbox (topic, message_key, message_value, operation_id, sequence) FROM STDIN"
        ) as copy,
    ):
        for row in range(rows):
            operation_id = f"op-{row % OPERATIONS:04d}"
            copy.write_row(
                (
                    settings.topics.operations,
                    operation_id.encode(),
                    padding,
                    operation_id,
                    row // OPERATIONS + 1,
                )
            )


def relay_rate(base: Settings, rows: int, batch: int, value_bytes: int) -> float:
    """Rows/s of one relay draining ``rows`` pre-filled outbox rows."""
    with isolated(base, batch) as settings:
        fill_outbox(settings, rows, value_bytes)
        with OutboxRelay(settings) as relay:
            started = time.monotonic()
            published = 0
            while count := relay.run_once():
                published += count
            elapsed = time.monotonic() - started
        if published != rows:
            raise RuntimeError(f"published {published} of {rows} rows")
    return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=Settings().relay.batch_size)
    parser.add_argument("--value-bytes", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    LocalStack(settings).up()
    rates = [
        relay_rate(settings, args.rows, args.batch, args.value_bytes) for _ in range(args.runs)
    ]
    print(
        f"relay, {args.rows} rows of {args.value_bytes} B, batch {args.batch}: "
        f"median {statistics.median(rates):,.0f} rows/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
    )


if __name__ == "__main__":
    main()
