"""Wait for a condition with a deadline, never a guessed sleep."""

import time
from collections.abc import Callable
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
