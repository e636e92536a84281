"""Exponential backoff with jitter, bounded."""

import random

# 2.0 ** 1024 overflows; past this exponent every sane ceiling is reached long before.
_MAX_EXPONENT = 1000


def backoff_delay(attempt: int, initial_s: float, max_s: float) -> float:
    """Delay before retry number ``attempt`` (1-based): uniform in the upper half of
    min(max, initial * 2^(n-1)). Any attempt number works, however long an outage lasts."""
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    ceiling = min(max_s, initial_s * 2.0**exponent)
    return random.uniform(ceiling / 2, ceiling)
