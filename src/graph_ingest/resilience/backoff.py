"""Exponential backoff with jitter, bounded; and :class:`Backoff`, the one retry helper.

Every loop that tries work again (the applier's in-place retry, the planner's batches and held
requests, the outbox relay, the LLM chat client) counts its consecutive failures in a
:class:`Backoff` and waits the delay it gives. The loops wait in different ways (paused partitions
polled to stay in the group, a held partition, a stop event, a plain sleep), so the helper owns
the counting and the delay, never the waiting: a retry library that sleeps itself (tenacity)
would fit only the chat client.
"""

from __future__ import annotations

import random

# 2.0 ** 1024 overflows; past this exponent every sane ceiling is reached long before.
_MAX_EXPONENT = 1000


def backoff_delay(attempt: int, initial_s: float, max_s: float) -> float:
    """Delay before retry number ``attempt`` (1-based): uniform in the upper half of
    min(max, initial * 2^(n-1)). Any attempt number works, however long an outage lasts."""
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    ceiling = min(max_s, initial_s * 2.0**exponent)
    return random.uniform(ceiling / 2, ceiling)


class Backoff:
    """The consecutive failures of one piece of work, and how long to wait before its next try."""

    __slots__ = ("failures", "initial_s", "max_s")

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.failures = 0

    def failed(self) -> float:
        """Count one more failure; the delay before the next try."""
        self.failures += 1
        return self.delay()

    def delay(self) -> float:
        """The delay before the next try (as after one failure when none is counted)."""
        return backoff_delay(max(self.failures, 1), self.initial_s, self.max_s)

    def succeeded(self) -> int:
        """The work went through: start counting again; how many failures it had."""
        failures, self.failures = self.failures, 0
        return failures


__all__ = ["Backoff", "backoff_delay"]
