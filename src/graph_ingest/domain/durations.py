"""Durations as operators write them (``30s``, ``5m``, ``250ms``, ``1h30m``), read and shown the
same way by the CLI's options and the API's parameters."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``2h``, ``1d``, ``250ms``, ``1h30m``, or plain seconds -> seconds."""
    compact = text.strip().lower().replace(" ", "")
    pos, total, parts = 0, 0.0, 0
    while pos < len(compact):
        match = _DURATION.match(compact, pos)
        if match is None or match.end() == pos:
            break
        unit = match["unit"]
        if unit is None and (parts or match.end() != len(compact)):
            break  # a bare number (seconds) only alone: "1h30" is ambiguous
        total += float(match["amount"]) * _UNIT_S[unit or "s"]
        pos, parts = match.end(), parts + 1
    if not compact or pos != len(compact):
        raise ValueError(
            f"{text!r} is not a duration: use a number with a unit, e.g. 30s, 5m, 2h, 1h30m"
        )
    return total


def format_duration(seconds: float) -> str:
    """Seconds -> the shortest of ``1d``, ``2h``, ``5m``, ``30s``, ``1.5s`` that is exact."""
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_S[unit]
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"


__all__ = ["format_duration", "parse_duration"]
