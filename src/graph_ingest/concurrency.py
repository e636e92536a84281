"""Running one piece of blocking work beside another, on a thread that never outlives the call."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def alongside(work: Callable[[T], object], argument: T) -> Iterator[None]:
    """Run ``work(argument)`` on its own thread while the block runs, and leave only once it has
    ended, so nothing of it is still running when the caller goes on (or retries). Its exception
    is raised after the block; if the block raised, the block's exception is the one raised.

    Worth it where both sides mostly wait on sockets (the GIL is released meanwhile)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work(argument)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, name=f"alongside-{getattr(work, '__name__', 'work')}")
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        raise failed[0]


__all__ = ["alongside"]
