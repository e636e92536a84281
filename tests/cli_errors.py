"""What a command prints when it fails under --json: one JSON error object on stdout."""

from __future__ import annotations

import json
from typing import Any

from click.testing import Result

from graph_ingest.cli.exit_codes import ExitCode


def json_error(result: Result) -> dict[str, Any]:
    """The ``error`` object of ``result``'s stdout, checked to be all it printed, nothing on
    stderr, and to carry the exit code the command exited with."""
    assert result.stderr == "", result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, document
    error: dict[str, Any] = document["error"]
    assert error["exit_code"] == result.exit_code
    return error


def not_found(message: str) -> dict[str, Any]:
    """The error object of a command asked about an id that does not exist."""
    return {"code": "NOT_FOUND", "exit_code": int(ExitCode.NOT_FOUND), "message": message}
