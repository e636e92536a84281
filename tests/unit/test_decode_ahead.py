"""DecodeAhead: chunks decoded in order on one background thread, or on the caller's when taken at
once; discard and errors."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from graph_ingest.consumers.decode_ahead import DecodeAhead
from graph_ingest.kafka.consumer import Usable


def usable(value: int) -> Usable:
    """Stands in for (message, headers, retry): the fake decoder reads the first element only."""
    return cast(Usable, (value, {}, None))


class Recorder:
    """A decoder that records the thread it ran on and can be held until released."""

    def __init__(self) -> None:
        self.threads_by_value: dict[int, str] = {}
        self.release = threading.Event()
        self.release.set()

    def __call__(self, item: Usable) -> tuple[str, int]:
        self.release.wait(5)
        value = cast(Any, item)[0]
        self.threads_by_value[value] = threading.current_thread().name
        if value < 0:
            raise ValueError(f"cannot decode {value}")
        return ("p0" if value % 2 == 0 else "p1", value)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def ahead(recorder: Recorder) -> Any:
    decoding: DecodeAhead[tuple[str, int]] = DecodeAhead(recorder)
    yield decoding
    decoding.close()


def test_chunks_come_out_in_the_order_they_went_in_decoded_on_another_thread(
    ahead: DecodeAhead[tuple[str, int]], recorder: Recorder
) -> None:
    ahead.submit([usable(v) for v in (1, 2, 3)])
    ahead.submit([])  # nothing fetched: no chunk
    ahead.submit([usable(v) for v in (4, 5)])
    assert (ahead.in_flight, ahead.messages) == (2, 5)
    assert [v for _, v in ahead.take()] == [1, 2, 3, 4, 5]
    assert (ahead.in_flight, ahead.messages) == (0, 0)
    assert ahead.take() == []
    threads = set(recorder.threads_by_value.values())
    assert threads and threading.current_thread().name not in threads
    assert all(name.startswith("decode-ahead") for name in threads)


def test_decode_now_decodes_on_the_callers_thread_after_the_chunks_in_flight(
    ahead: DecodeAhead[tuple[str, int]], recorder: Recorder
) -> None:
    ahead.submit([usable(1), usable(2)])
    ahead.decode_now([usable(3), usable(4)])
    ahead.decode_now([])  # nothing fetched: no chunk
    assert (ahead.in_flight, ahead.messages) == (2, 4)
    assert [v for _, v in ahead.take()] == [1, 2, 3, 4]
    caller = threading.current_thread().name
    assert recorder.threads_by_value[3] == recorder.threads_by_value[4] == caller
    assert recorder.threads_by_value[1].startswith("decode-ahead")


def test_decode_now_raises_at_once_and_queues_nothing_of_its_chunk(
    ahead: DecodeAhead[tuple[str, int]],
) -> None:
    ahead.submit([usable(1)])
    with pytest.raises(ValueError, match="cannot decode -2"):
        ahead.decode_now([usable(3), usable(-2)])
    assert [v for _, v in ahead.take()] == [1]


def test_discard_drops_what_it_is_told_to_even_while_still_decoding(
    ahead: DecodeAhead[tuple[str, int]], recorder: Recorder
) -> None:
    recorder.release.clear()
    ahead.submit([usable(v) for v in range(6)])
    ahead.submit([usable(v) for v in range(6, 9)])
    threading.Timer(0.05, recorder.release.set).start()
    ahead.discard(lambda decoded: decoded[0] == "p1")  # waits for the held decodes
    assert (ahead.in_flight, ahead.messages) == (1, 5)
    ahead.submit([usable(11), usable(12)])
    assert [v for _, v in ahead.take()] == [0, 2, 4, 6, 8, 11, 12]


def test_discarding_everything_leaves_nothing_in_flight(
    ahead: DecodeAhead[tuple[str, int]],
) -> None:
    ahead.submit([usable(1), usable(3)])
    ahead.discard(lambda decoded: True)
    assert (ahead.in_flight, ahead.messages) == (0, 0)
    assert ahead.take() == []


def test_a_decoder_that_raises_raises_on_take(ahead: DecodeAhead[tuple[str, int]]) -> None:
    ahead.submit([usable(1), usable(-1)])
    ahead.submit([usable(3)])
    with pytest.raises(ValueError, match="cannot decode -1"):
        ahead.take()
    assert ahead.messages == 1  # the chunk after the one that raised is still to take
