"""Option types shared by the commands: durations such as ``--older-than 5m``, and times with
their timezone such as ``--source-updated-at 2026-12-01T09:30:00Z``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import click

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


class Duration(click.ParamType[float]):
    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


TIME_EXAMPLE = "2026-12-01T09:30:00Z or 2026-12-01T10:30:00+01:00"


class AwareDateTime(click.ParamType[datetime]):
    """An ISO 8601 time with its timezone. A naive time is refused: which clock it was read on
    would be a guess, and the planner compares it with times from other machines."""

    name = "time"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            parsed = value
        else:
            try:
                parsed = datetime.fromisoformat(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not an ISO 8601 time: use e.g. {TIME_EXAMPLE}", param, ctx)
        if parsed.utcoffset() is None:
            self.fail(f"{value!r} has no timezone: add one, e.g. {TIME_EXAMPLE}", param, ctx)
        return parsed
