"""SIGTERM/SIGINT become a stop event: workers finish the batch in hand, commit and leave."""

import signal
import threading
from types import FrameType


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop
