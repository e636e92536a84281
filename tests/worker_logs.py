"""Worker processes whose stderr a test reads: the real CLI, passwords set, output in files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson

from graph_ingest.stack.process import start_bound
from tests.integration.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[1]

PASSWORDS = {
    "GRAPH_INGEST_POSTGRES__PASSWORD": "pg-Pa55-7f3e",
    "GRAPH_INGEST_NEO4J__PASSWORD": "neo-Pa55-91ab",
}
"""Set for every worker (the test stack's PostgreSQL trusts, its Neo4j has auth off: they are
accepted and must never be logged)."""

SASL_PASSWORD = "sasl-Pa55-c0de"

# librdkafka's own line format when it prints to stderr itself: "%3|1733138112.123|FAIL|rdkafka#…"
RAW_LIBRDKAFKA = re.compile(r"^%\d+\|\d+\.\d+\|")


def start_worker(
    pipeline: Pipeline,
    kind: str,
    worker_id: str,
    stderr: Path,
    *options: str,
    command: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``graph-ingest [options] worker <kind> [command]``, its stderr into ``stderr``."""
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", *options, "worker", kind, *command],
        cwd=REPO,
        env={
            **os.environ,
            **pipeline.env(),
            **PASSWORDS,
            f"GRAPH_INGEST_{kind.upper()}__WORKER_ID": worker_id,
            **(env or {}),
        },
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )


def lines_of(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def json_records(path: Path) -> list[dict[str, object]]:
    """Every line of ``path`` as a JSON object (an AssertionError names the first that is not)."""
    records = []
    for line in lines_of(path):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
        assert isinstance(record, dict), line
        records.append(record)
    return records


def assert_no_secret(path: Path, *secrets: str) -> None:
    text = path.read_text(errors="replace")
    for secret in (*PASSWORDS.values(), *secrets):
        assert secret not in text, f"{secret!r} is in {path.name}"
