"""Option types shared by the commands: durations such as ``--older-than 5m``, and times with
their timezone such as ``--source-updated-at 2026-12-01T09:30:00Z``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from graph_ingest.domain.durations import parse_duration


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
