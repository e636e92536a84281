"""``waiting.Bell``: a self-pipe another thread rings to end a ``select`` at once."""

from __future__ import annotations

import select
import threading

from graph_ingest.waiting import Bell


def readable(bell: Bell, timeout_s: float) -> bool:
    return bool(select.select([bell.fileno], [], [], timeout_s)[0])


def test_a_ring_from_another_thread_ends_a_select_and_stays_until_hushed() -> None:
    bell = Bell()
    try:
        assert not readable(bell, 0.0)
        threading.Timer(0.05, bell.ring).start()
        assert readable(bell, 30.0)
        bell.ring()  # rung twice: still one readable descriptor, hushed at once
        assert readable(bell, 0.0)
        bell.hush()
        assert not readable(bell, 0.0)
    finally:
        bell.close()


def test_ringing_a_closed_bell_does_nothing() -> None:
    bell = Bell()
    bell.close()
    bell.ring()
    bell.close()
