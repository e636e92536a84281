"""alongside: the work runs on another thread at the same time as the block, and never outlives it."""

from __future__ import annotations

import threading

import pytest

from graph_ingest.concurrency import alongside


def test_the_work_runs_on_another_thread_while_the_block_runs() -> None:
    started, block_done = threading.Event(), threading.Event()
    seen: list[str] = []

    def work(name: str) -> None:
        started.set()
        seen.append(threading.current_thread().name)
        assert block_done.wait(5), "the block did not run while the work ran"
        seen.append(name)

    with alongside(work, "finished"):
        assert started.wait(5)
        block_done.set()
    assert seen[-1] == "finished"  # left only once the work had ended
    assert seen[0] != threading.current_thread().name


def test_the_works_exception_is_raised_after_the_block() -> None:
    ran: list[str] = []

    def work(_: None) -> None:
        raise ConnectionError("neo4j went away")

    with pytest.raises(ConnectionError, match="went away"), alongside(work, None):
        ran.append("block")
    assert ran == ["block"]


def test_the_blocks_exception_wins_and_the_work_still_ends_first() -> None:
    ended = threading.Event()

    def work(_: None) -> None:
        ended.wait(0.05)
        ended.set()
        raise ConnectionError("second")

    with pytest.raises(KeyError), alongside(work, None):
        raise KeyError("first")
    assert ended.is_set()
