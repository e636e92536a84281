"""Named exit codes, so scripts can tell "not found" from "service down" from "bad input"."""

import functools
from collections.abc import Callable
from enum import IntEnum
from typing import ParamSpec, TypeVar

import click

from graph_ingest.cli.config import InvalidSetting
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    UNAVAILABLE = 4
    INVALID_INPUT = 5
    NOT_COMPLETED = 6  # `submit --wait`: a request did not reach COMPLETED
    INTERRUPTED = 130  # SIGINT/SIGTERM ended the run early; running it again goes on


_BY_STATUS = {
    StatusCode.NOT_FOUND: ExitCode.NOT_FOUND,
    StatusCode.UNAVAILABLE: ExitCode.UNAVAILABLE,
    StatusCode.DEADLINE_EXCEEDED: ExitCode.UNAVAILABLE,
    StatusCode.INVALID_ARGUMENT: ExitCode.INVALID_INPUT,
    StatusCode.DATA_LOSS: ExitCode.INVALID_INPUT,
    StatusCode.FAILED_PRECONDITION: ExitCode.INVALID_INPUT,
}

P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into one line on stderr and a named exit code, instead of a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except InvalidSetting as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(ExitCode.USAGE) from exc
        except GraphIngestError as exc:
            click.echo(f"error [{exc.code}]: {exc}", err=True)
            raise SystemExit(_BY_STATUS.get(exc.code, ExitCode.ERROR)) from exc

    return wrapper
