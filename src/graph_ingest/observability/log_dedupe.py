"""Once per distinct message per interval: a logging filter for chatty sources (librdkafka retries
a dead broker every second and says so each time).

Two records are the same message when their logger, level and text agree once every number is
ignored (ports, counts, milliseconds, client numbers such as ``rdkafka#consumer-3``). The first
of a kind passes; the repeats within ``interval_s`` of it are dropped and counted, and when the
interval ends one record says how many were dropped (``… (repeated 41 times in 60s)``) and the
next one of the kind passes again. :meth:`Deduplicate.sweep` ends the intervals that are over;
whoever installs the filter calls it now and then (``observability.logs`` runs a timer thread)
and once at exit with ``final=True``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_NUMBERS = re.compile(r"\d+")

SUMMARY = "dedupe_summary"
"""The record attribute that marks a count of repeats (it is never dropped itself)."""

Key = tuple[str, int, str]


def normalised(message: str) -> str:
    """The message with every number replaced: what two repeats have in common."""
    return _NUMBERS.sub("#", message)


@dataclass(slots=True)
class _Window:
    started: float
    record: logging.LogRecord
    repeats: int = 0


class Deduplicate(logging.Filter):
    """Let the first of each distinct message through per ``interval_s``; count the rest."""

    def __init__(self, interval_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        self._windows: dict[Key, _Window] = {}
        self._lock = threading.Lock()  # librdkafka logs from each thread that polls a client

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, SUMMARY, False) or self.interval_s <= 0:
            return True
        self.sweep()
        key = (record.name, record.levelno, normalised(record.getMessage()))
        with self._lock:
            window = self._windows.get(key)
            if window is None:
                self._windows[key] = _Window(self._clock(), record)
                return True
            window.repeats += 1
            return False

    def sweep(self, *, final: bool = False) -> None:
        """End the intervals that are over (all of them when ``final``): log how many repeats
        each one dropped, and let the next of its kind through."""
        now = self._clock()
        with self._lock:
            over = [
                key
                for key, window in self._windows.items()
                if final or now - window.started >= self.interval_s
            ]
            ended = [self._windows.pop(key) for key in over]
        for window in ended:
            if window.repeats:
                _emit_summary(window, now)


def _emit_summary(window: _Window, now: float) -> None:
    first = window.record
    logger = logging.getLogger(first.name)
    summary = logger.makeRecord(
        first.name,
        first.levelno,
        first.pathname,
        first.lineno,
        "%s (repeated %d times in %.0fs)",
        (first.getMessage(), window.repeats, now - window.started),
        None,
        extra={SUMMARY: True},
    )
    logger.handle(summary)


__all__ = ["SUMMARY", "Deduplicate", "normalised"]
