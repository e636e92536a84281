"""Applier worker processes in one consumer group, for the group tests: start one under a name
(its client id), see the group as the broker does, count what completed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient

from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[2]


def start_applier(pipeline: Pipeline, log: Path, name: str, **env: str) -> subprocess.Popen[bytes]:
    """``graph-ingest -v worker applier`` (its log says what the group did) whose group member
    shows ``name`` as its client id; ``env``: more GRAPH_INGEST_* variables (e.g. the group
    protocol)."""
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "-v", "worker", "applier"],
        cwd=REPO,
        env={**os.environ, **pipeline.env(), "GRAPH_INGEST_KAFKA__CLIENT_ID": name, **env},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def group_assignments(pipeline: Pipeline) -> dict[str, set[tuple[str, int]]]:
    """The applier group's members as the coordinator sees them: client id -> partitions."""
    group = pipeline.settings.applier.group_id
    admin = AdminClient(pipeline.settings.kafka.common_config())
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return {
        member.client_id: {
            (tp.topic, tp.partition) for tp in member.assignment.topic_partitions or []
        }
        for member in described.members
    }


def group_members(pipeline: Pipeline) -> set[str]:
    """The client ids of the applier group's members."""
    return set(group_assignments(pipeline))


def completed(pipeline: Pipeline) -> int:
    rows = pipeline.sql("SELECT count(*) FROM operations WHERE stage = 'COMPLETED'")
    return int(rows[0][0])


def wait_completed(pipeline: Pipeline, count: int, timeout_s: float = 120) -> None:
    wait_until(
        lambda: completed(pipeline) >= count,
        timeout_s=timeout_s,
        interval_s=0.2,
        what=f"{count} COMPLETED operations",
    )
