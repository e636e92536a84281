"""Named exit codes, so scripts can tell "not found" from "service down" from "bad input"; and
how a command's failure is shown: one line on stderr, or under ``--json`` one JSON object on
stdout, with the same exit code either way."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, NoReturn, ParamSpec, TypeVar

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

JSON_FLAG = "--json"
"""The option that asks for machine-readable output; every command names its parameter
``as_json``."""


def json_asked(ctx: click.Context | None = None) -> bool:
    """Whether the command of ``ctx`` (default: the running one) was given ``--json``."""
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.params.get("as_json"))


class CommandFailure:
    """A command's failure, with its status code and named exit code.

    :meth:`exit` shows it as the command was asked: ``error [CODE]: message`` on stderr
    (details on the lines after), or under ``--json`` one JSON object on stdout, where a script
    reads the results::

        {"error": {"code": "NOT_FOUND", "exit_code": 3, "message": "...", "details": "..."}}

    ``code`` is a StatusCode name; ``details`` is there only when the error has any.
    """

    def __init__(
        self,
        message: str,
        *,
        code: StatusCode,
        exit_code: ExitCode | None = None,
        details: str = "",
    ) -> None:
        self.message = message
        self.code = code
        self.exit_code = _BY_STATUS.get(code, ExitCode.ERROR) if exit_code is None else exit_code
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.code.value,
            "exit_code": int(self.exit_code),
            "message": self.message,
        }
        if self.details:
            error["details"] = self.details
        return {"error": error}

    def exit(self, *, as_json: bool | None = None) -> NoReturn:
        """Show it (as JSON if ``as_json``; default: if the running command was given
        ``--json``) and end the command with its exit code."""
        if json_asked() if as_json is None else as_json:
            click.echo(json.dumps(self.as_dict(), indent=2))
        else:
            click.echo(f"error [{self.code}]: {self.message}", err=True)
            if self.details:
                click.echo(self.details, err=True)
        raise SystemExit(self.exit_code)


def _exit_as_usage_error(exc: click.UsageError) -> NoReturn:
    failure = CommandFailure(
        exc.format_message(), code=StatusCode.INVALID_ARGUMENT, exit_code=ExitCode.USAGE
    )
    failure.exit(as_json=True)


class JsonCommand(click.Command):
    """A command with ``--json``: given it, a usage error (a bad option, a missing argument) is
    JSON on stdout too, exit 2 as ever; without it, click shows the usage as usual."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        asked = JSON_FLAG in _options(args)  # before parsing, which consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if not asked:
                raise
            _exit_as_usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if not json_asked(ctx):
                raise
            _exit_as_usage_error(exc)


def _options(args: Sequence[str]) -> Sequence[str]:
    """``args`` up to a ``--`` (after it, a ``--json`` is an argument)."""
    return args[: args.index("--")] if "--" in args else args


P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into a :class:`CommandFailure` shown with a named exit code, not a
    traceback (a bad setting is a usage error: exit 2)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except InvalidSetting as exc:
            CommandFailure(str(exc), code=exc.code, exit_code=ExitCode.USAGE).exit()
        except GraphIngestError as exc:
            CommandFailure(str(exc), code=exc.code).exit()

    return wrapper
