"""SIGTERM/SIGINT become a stop event: workers finish the batch in hand, commit and leave."""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


@contextmanager
def stopping_on_signals() -> Iterator[threading.Event]:
    """``stop_on_signals()`` for the block only: the previous handlers come back after it (a
    command run in-process, as tests do, leaves Ctrl-C as it found it)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop_on_signals()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
