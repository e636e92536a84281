"""Exponential backoff with jitter, bounded."""

import random


def backoff_delay(attempt: int, initial_s: float, max_s: float) -> float:
    """Delay before retry number ``attempt`` (1-based): uniform in the upper half of min(max, initial * 2^(n-1))."""
    ceiling = min(max_s, initial_s * (2 ** max(attempt - 1, 0)))
    return random.uniform(ceiling / 2, ceiling)
