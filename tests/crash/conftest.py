import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.conftest import pipeline, pipeline_factory

__all__ = ["pipeline", "pipeline_factory", "processes"]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test starts; whatever is still alive at the end is killed, by pid."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
