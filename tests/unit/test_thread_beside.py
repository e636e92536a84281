"""thread_beside: a thread that runs while a block runs, and is stopped and joined at its end."""

from __future__ import annotations

import threading

import pytest

from graph_ingest.waiting import thread_beside


def test_the_thread_runs_with_the_block_and_is_stopped_and_joined_when_it_ends() -> None:
    started = threading.Event()
    seen: list[str] = []

    def run(stop: threading.Event) -> None:
        started.set()
        stop.wait()
        seen.append(threading.current_thread().name)

    with thread_beside(run, name="beside"):
        assert started.wait(10)
        assert seen == []  # still running: stop is not set while the block runs
    assert seen == ["beside"]  # joined: it ended before the block's exit returned


def test_a_block_that_raises_still_stops_and_joins_the_thread() -> None:
    ended = threading.Event()

    def run(stop: threading.Event) -> None:
        stop.wait()
        ended.set()

    with pytest.raises(RuntimeError, match="the block failed"), thread_beside(run, name="b"):
        raise RuntimeError("the block failed")
    assert ended.is_set()
