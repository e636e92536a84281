"""SIGKILL a real relay process mid-stream; its successor must publish everything, in order per key.

At-least-once: rows produced but not yet marked when the relay died are published again. The
assertion is what consumers rely on: every (operation, sequence) arrives, and per operation the first
occurrences come in sequence order, so dropping sequences already seen yields 1..N.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from graph_ingest.kafka.admin import TopicSpec, create_topics, delete_topics
from graph_ingest.settings import Settings
from graph_ingest.stack.process import start_bound
from graph_ingest.store.migrate import migrate
from graph_ingest.waiting import wait_until
from tests.kafka_messages import read_to_end

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
OPERATIONS = 500
EVENTS = 10
ROWS = OPERATIONS * EVENTS
BATCH = 20


@pytest.fixture
def settings(stack_settings: Settings) -> Iterator[Settings]:
    """This test's own schema (migrated) and operations topic."""
    tag = uuid.uuid4().hex[:10]
    settings = stack_settings.model_copy(
        update={
            "topics": stack_settings.topics.model_copy(
                update={"operations": f"t.{tag}.operations"}
            ),
            "postgres": stack_settings.postgres.model_copy(update={"schema_name": f"t_{tag}"}),
        }
    )
    create_topics(settings, [TopicSpec(settings.topics.operations, partitions=3)])
    migrate(settings.postgres)
    yield settings
    delete_topics(settings, [settings.topics.operations])
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(settings.postgres.schema_name)
            )
        )


def fill_outbox(settings: Settings) -> None:
    """500 operations x sequences 1..10, interleaved: op-0/1, op-1/1, …, op-0/2, …"""
    with (
        psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn,
        conn.cursor() as cur,
        cur.copy(
            "COPY outbox (topic, message_key, message_value, operation_id, sequence) FROM STDIN"
        ) as copy,
    ):
        for seq in range(1, EVENTS + 1):
            for op in range(OPERATIONS):
                operation_id = f"op-{op:03d}"
                copy.write_row(
                    (
                        settings.topics.operations,
                        operation_id.encode(),
                        f"{operation_id}:{seq}".encode(),
                        operation_id,
                        seq,
                    )
                )


def unpublished(settings: Settings) -> int:
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM outbox WHERE published_at IS NULL").fetchone()
    assert row is not None
    return int(row[0])


def _backlog_at_most(settings: Settings, limit: int) -> tuple[int] | None:
    left = unpublished(settings)
    return (left,) if left <= limit else None


def start_relay(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "-v", "worker", "relay"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def read_topic(settings: Settings, topic: str) -> list[tuple[str, int]]:
    """Every (operation_id, sequence) on ``topic`` up to its current end, per partition in order."""
    received: list[tuple[str, int]] = []
    for key, value, headers in read_to_end(settings, topic):
        operation_id, seq = value.decode().split(":")
        assert key == operation_id.encode()
        assert headers["sequence"] == seq.encode()
        received.append((operation_id, int(seq)))
    return received


def test_killed_relay_is_finished_by_its_successor_without_loss_or_reordering(
    settings: Settings,
    stack_env: dict[str, str],
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # Given a full outbox and a relay process publishing it in small batches
    fill_outbox(settings)
    env = {
        **os.environ,
        **stack_env,
        "GRAPH_INGEST_POSTGRES__SCHEMA_NAME": settings.postgres.schema_name,
        "GRAPH_INGEST_RELAY__BATCH_SIZE": str(BATCH),
        "GRAPH_INGEST_RELAY__IDLE_POLL_INTERVAL_S": "0.05",
    }
    log = tmp_path / "relay.log"

    # When it is SIGKILLed twice mid-stream (about 1/5 and 3/5 through) and restarted each time
    for published_at_least in (ROWS // 5, 3 * ROWS // 5):
        relay = start_relay(env, log)
        processes.append(relay)
        (backlog,) = wait_until(
            functools.partial(_backlog_at_most, settings, ROWS - published_at_least),
            timeout_s=120,
            interval_s=0.005,
            what=f"{published_at_least} rows published",
        )
        os.kill(relay.pid, signal.SIGKILL)
        relay.wait(timeout=30)
        assert relay.returncode == -signal.SIGKILL
        assert 0 < backlog < ROWS, f"relay finished before it was killed:\n{log.read_text()}"

    started = time.monotonic()
    backlog_at_restart = unpublished(settings)
    processes.append(start_relay(env, log))
    wait_until(lambda: unpublished(settings) == 0, timeout_s=120, interval_s=0.02, what="backlog 0")
    elapsed = time.monotonic() - started

    # Then every (operation, sequence) is on the topic, first occurrences in sequence order
    received = read_topic(settings, settings.topics.operations)
    by_operation: dict[str, list[int]] = defaultdict(list)
    for operation_id, seq in received:
        by_operation[operation_id].append(seq)
    assert len(by_operation) == OPERATIONS
    duplicates = 0
    for operation_id, sequences in by_operation.items():
        first_seen: list[int] = []
        for seq in sequences:
            if seq in first_seen:
                duplicates += 1  # a re-send of a sequence already delivered
            else:
                first_seen.append(seq)
        assert first_seen == list(range(1, EVENTS + 1)), (operation_id, sequences)
    assert len(received) == ROWS + duplicates
    print(
        f"\nrelay crash: {ROWS} rows, {len(received)} messages, {duplicates} duplicates after 2 "
        f"SIGKILLs; successor published {backlog_at_restart} rows in {elapsed:.2f}s "
        f"(batch {BATCH}, incl. start-up)"
    )
