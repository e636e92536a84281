"""Inter-process file locks (fcntl), re-entrant within one process."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class FileLock:
    """An exclusive ``flock`` on ``path``; nested use in the same process does not deadlock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._guard = threading.RLock()
        self._depth = 0
        self._handle: IO[bytes] | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._guard:
            if self._depth == 0:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                handle = open(self.path, "ab")  # noqa: SIM115 - closed in finally below
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                self._handle = handle
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._handle is not None:
                    fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
                    self._handle.close()
                    self._handle = None


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """A one-shot exclusive lock on ``path`` (created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
