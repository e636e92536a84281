"""Session fixtures for the real local stack (Kafka, Neo4j, PostgreSQL) on TEST ports.

The stack starts only when a test asks for one of these fixtures, so unit tests run without
services. Its data lives in <repo>/.graph-ingest/test-stack, apart from a dev stack on the default
ports. When the last test session using it ends, the services that test sessions started are
stopped; services that were already running before are left alone (so CI stops everything it
started, and a stack you started by hand stays up). Concurrent sessions (two terminals) share the
stack: each registers a lease, and only the last one out stops anything.
GRAPH_INGEST_TEST_KEEP_STACK=1 keeps everything running (fast local iteration: the next session
finds it up and pays nothing).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_ingest.settings import Settings
from graph_ingest.stack.envvars import stack_env as env_for
from graph_ingest.stack.locks import file_lock
from graph_ingest.stack.manager import LocalStack
from graph_ingest.stack.process import is_running, read_pid
from tests.young_collections import YoungCollection, young_collections

logger = logging.getLogger(__name__)

TEST_RUN_DIR = Path(__file__).resolve().parent.parent / ".graph-ingest" / "test-stack"
# GRAPH_INGEST_TEST_PORT_OFFSET moves every test port, so two clones can test at once.
PORT_OFFSET_ENV = "GRAPH_INGEST_TEST_PORT_OFFSET"
TEST_PORTS = {
    name: port + int(os.environ.get(PORT_OFFSET_ENV, "0"))
    for name, port in {
        "kafka_port": 29192,
        "kafka_controller_port": 29193,
        "neo4j_bolt_port": 27787,
        "postgres_port": 25532,
    }.items()
}
KEEP_STACK_ENV = "GRAPH_INGEST_TEST_KEEP_STACK"
SESSIONS_DIR = TEST_RUN_DIR / "sessions"
STARTED_FILE = SESSIONS_DIR / "started-by-tests"


def make_test_settings() -> Settings:
    """Settings for the test stack; clients point at its ports whatever the environment says."""
    base = Settings()
    stack = base.stack.model_copy(update={"run_dir": TEST_RUN_DIR, **TEST_PORTS})
    return Settings(
        stack=stack,
        kafka=base.kafka.model_copy(update={"bootstrap_servers": f"127.0.0.1:{stack.kafka_port}"}),
        neo4j=base.neo4j.model_copy(update={"uri": f"bolt://127.0.0.1:{stack.neo4j_bolt_port}"}),
        postgres=base.postgres.model_copy(
            update={"host": "127.0.0.1", "port": stack.postgres_port}
        ),
    )


LINEAGE_SEED = 16  # the randomized lineage test's fixed seed (``--seeds N`` runs N from it)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seeds",
        type=int,
        default=1,
        help="how many seeds the randomized lineage test runs (from a fixed one; default 1)",
    )


@pytest.fixture
def lineage_seeds(request: pytest.FixtureRequest) -> list[int]:
    count = int(request.config.getoption("--seeds"))
    if count < 1:
        raise pytest.UsageError("--seeds must be at least 1")
    return list(range(LINEAGE_SEED, LINEAGE_SEED + count))


def _keep_stack() -> bool:
    return os.environ.get(KEEP_STACK_ENV, "").lower() in ("1", "true", "yes")


def _other_live_sessions() -> list[int]:
    live = []
    for lease in SESSIONS_DIR.glob("session-*"):
        pid = read_pid(lease)
        if pid is not None and pid != os.getpid() and is_running(pid):
            live.append(pid)
        elif pid != os.getpid():
            lease.unlink(missing_ok=True)  # left by a session that was killed
    return live


def _started_by_tests() -> set[str]:
    return set(STARTED_FILE.read_text().split()) if STARTED_FILE.exists() else set()


def _stop(stack: LocalStack, names: set[str]) -> None:
    if names >= set(stack.names):
        # All three in parallel. In CI the data goes too: a PostgreSQL cluster moved out of a
        # private clone into the temporary directory would otherwise outlive the clone.
        stack.down(purge=os.environ.get("CI", "").lower() == "true")
        return
    for name in stack.names:
        if name in names:
            stack.stop_service(name)


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The test stack, up and answering; outage tests stop/start single services through it
    (and must start them again, e.g. in a ``finally``)."""
    stack = LocalStack(make_test_settings(), report=logger.info)
    lease = SESSIONS_DIR / f"session-{os.getpid()}"
    with file_lock(SESSIONS_DIR / ".lock"):
        lease.write_text(f"{os.getpid()}\n")
        not_ready = {s.name for s in stack.status().services if not s.ready}
        STARTED_FILE.write_text(" ".join(sorted(_started_by_tests() | not_ready)) + "\n")
    try:
        stack.up()
        yield stack
    finally:
        with file_lock(SESSIONS_DIR / ".lock"):
            lease.unlink(missing_ok=True)
            if not _other_live_sessions():
                if not _keep_stack():
                    _stop(stack, _started_by_tests())
                STARTED_FILE.unlink(missing_ok=True)  # what is still up counts as "already up"


@pytest.fixture(scope="session")
def stack_settings(local_stack: LocalStack) -> Settings:
    """Settings pointing at the running test stack (ports 29192/29193, 27787, 25532 + offset)."""
    return local_stack.settings


@pytest.fixture(scope="session")
def stack_env(stack_settings: Settings) -> dict[str, str]:
    """GRAPH_INGEST_* variables that make Settings() in a subprocess use the test stack."""
    return env_for(stack_settings)


@pytest.fixture
def young_gc_collections() -> Iterator[list[YoungCollection]]:
    """The garbage collector's young collections during the test, automatic ones switched off
    (``tests/young_collections.py``)."""
    with young_collections() as seen:
        yield seen
