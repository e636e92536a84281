"""Decoding ahead: the messages of the next batch are decoded on one background thread while the
applier waits for Neo4j and PostgreSQL on the current one.

Decoding (Avro, validation, fingerprint verification) is pure CPU and needs nothing of the
consumer, so it can run beside the apply: the apply mostly waits on sockets, with the GIL
released. The thread gives the GIL back after every message (``time.sleep(0)``), so an apply
whose reply has arrived waits for at most one message's decoding, not for the interpreter's
switch interval. That costs no CPU to speak of (issue 20: handing over every 2 ms of decoding
instead left the thread's CPU per plan unchanged); the profile's samples on that line are the
thread waiting for the GIL back while the apply runs, not work.

Messages the caller takes at once (``decode_now``) are decoded on its own thread instead: waking
the thread only to wait for it made the loop wait longer (issue 20: publish → PREPARED p50 fell
in nine alternating pairs of nine at 300 to 450 plans/s, by 1.5 to 31 ms; the workers' CPU held).

The thread itself is not free: with the fetch made before an apply decoded on the caller's
thread too, the workers spent up to 0.1 ms less CPU per small plan at a backlog, but the backlog
took 7-34 % longer to drain (issue 20: each in seven alternating pairs of eight); at 300 plans/s
the two did not differ. The thread stays for the rate.

Order is kept: chunks come out in the order they went in, each in its own order. Everything that
touches the consumer (polling, holds, rebalances, seeks) stays on the caller's thread; the caller
drops what it must no longer apply with :meth:`DecodeAhead.discard`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from graph_ingest.kafka.consumer import Usable

M = TypeVar("M")


class DecodeAhead(Generic[M]):
    """Chunks of fetched messages, decoded in order on one thread (or, with ``decode_now``, on the
    caller's); ``close`` stops the thread."""

    def __init__(self, decode: Callable[[Usable], M]) -> None:
        self._decode = decode
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode-ahead")
        self._chunks: deque[tuple[int, Future[list[M]]]] = deque()  # (messages, decoded)

    @property
    def in_flight(self) -> int:
        """Chunks submitted and not taken yet."""
        return len(self._chunks)

    @property
    def messages(self) -> int:
        """Messages submitted (and not discarded) that are not taken yet."""
        return sum(count for count, _ in self._chunks)

    def submit(self, fetched: Sequence[Usable]) -> None:
        if fetched:
            decoded = self._executor.submit(self._decode_all, list(fetched))
            self._chunks.append((len(fetched), decoded))

    def decode_now(self, fetched: Sequence[Usable]) -> None:
        """Decode ``fetched`` on the caller's thread, queued after the chunks in flight: for
        messages about to be taken. A decoder that raises raises here."""
        if fetched:
            self._queue_decoded([self._decode(usable) for usable in fetched])

    def take(self) -> list[M]:
        """Every submitted message, decoded, in order (waits for what is still decoding). A
        decoder that raised raises here."""
        taken: list[M] = []
        while self._chunks:
            _, decoded = self._chunks.popleft()
            taken.extend(decoded.result())
        return taken

    def discard(self, drop: Callable[[M], bool]) -> None:
        """Forget the submitted messages ``drop`` is true of (waits for what is still decoding)."""
        kept = [m for m in self.take() if not drop(m)]
        if kept:
            self._queue_decoded(kept)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._chunks.clear()

    def _queue_decoded(self, decoded: list[M]) -> None:
        done: Future[list[M]] = Future()
        done.set_result(decoded)
        self._chunks.append((len(decoded), done))

    def _decode_all(self, fetched: list[Usable]) -> list[M]:
        decoded = []
        for usable in fetched:
            decoded.append(self._decode(usable))
            time.sleep(0)  # hand the GIL to the apply if its reply is in
        return decoded


__all__ = ["DecodeAhead"]
