"""A figure read at scrape time, kept for a few seconds: a scrape stays cheap however often
Prometheus (or several of them) asks, and never waits on another scrape's read.

The first scrape past ``max_age_s`` reads; a scrape that comes while a read runs gets the last
result at once. A read that fails is remembered as a failure for ``max_age_s`` too (a dependency
that is down is not asked again on every scrape), counted in ``errors``, and logged once per
streak of failures; it never raises out of a scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class ScrapeCache(Generic[T]):
    def __init__(
        self,
        read: Callable[[], T],
        *,
        max_age_s: float,
        what: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age_s = max_age_s
        self._what = what
        self._clock = clock
        self._reading = threading.Lock()
        self._read_at: float | None = None
        self._last: T | None = None
        self._failing = False
        self.errors = 0
        """Reads that failed since the process started."""

    def get(self) -> T | None:
        """The last value read, read again first if it is older than ``max_age_s``; None when
        the last read failed (or none finished yet)."""
        due = self._read_at is None or self._clock() - self._read_at >= self._max_age_s
        if due and self._reading.acquire(blocking=False):
            try:
                self._last = self._try_read()
                self._read_at = self._clock()
            finally:
                self._reading.release()
        return self._last

    def _try_read(self) -> T | None:
        try:
            value = self._read()
        except Exception as exc:  # a scrape must answer whatever the read raised
            self.errors += 1
            if not self._failing:
                log.warning("%s not read: %s", self._what, exc)
            self._failing = True
            return None
        if self._failing:
            log.info("%s read again", self._what)
        self._failing = False
        return value


__all__ = ["ScrapeCache"]
