"""Wait for a condition with a deadline, never a guessed sleep; a bell that ends a wait on a
socket from another thread; and a thread that runs beside a block until the block ends."""

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    pass


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout_s: float,
    interval_s: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value, and return that value."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


class Bell:
    """A file descriptor that another thread makes readable (a self-pipe), to end at once a
    ``select`` that waits on it beside a socket. Rung, it stays readable until ``hush``."""

    def __init__(self) -> None:
        self.fileno, self._ringer = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()  # ring and close from different threads
        self._closed = False

    def ring(self) -> None:
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(BlockingIOError):  # the pipe is full: it rings already
                os.write(self._ringer, b"\0")

    def hush(self) -> None:
        with contextlib.suppress(BlockingIOError):  # emptied
            while os.read(self.fileno, 4096):
                pass

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self.fileno)
                os.close(self._ringer)


@contextlib.contextmanager
def thread_beside(
    run: Callable[[threading.Event], None], *, name: str, join_timeout_s: float | None = None
) -> Iterator[None]:
    """``run(stop)`` in a daemon thread while the block runs. When the block ends, however it
    ends, ``stop`` is set and the thread joined (for at most ``join_timeout_s``)."""
    stop = threading.Event()
    thread = threading.Thread(target=run, args=(stop,), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=join_timeout_s)
