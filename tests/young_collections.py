"""Watching the garbage collector's young collections in a test: each one's thread and what it
found unreachable, with the automatic ones switched off meanwhile (only an explicit collection
runs)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple


class YoungCollection(NamedTuple):
    thread: str
    collected: int


@contextmanager
def young_collections() -> Iterator[list[YoungCollection]]:
    """The young collections run inside the block, in order; thresholds restored after it."""
    seen: list[YoungCollection] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 0:
            seen.append(YoungCollection(threading.current_thread().name, info["collected"]))

    thresholds = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1_000_000_000, *thresholds[1:])
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*thresholds)
