"""Every command explains itself, and the README names every exit code the commands use."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli

README = Path(__file__).resolve().parents[2] / "README.md"

COMMANDS = [
    [],
    ["stack"],
    ["stack", "up"],
    ["stack", "status"],
    ["stack", "down"],
    ["topics", "create"],
    ["db", "migrate"],
    ["worker", "applier"],
    ["worker", "relay"],
    ["worker", "planner"],
    ["submit"],
    ["retract"],
    ["publish-plan"],
    ["status"],
    ["ops"],
    ["ops", "list"],
    ["resume"],
    ["recover"],
    ["demo"],
    ["reconcile"],
    ["dlq"],
    ["dlq", "list"],
    ["dlq", "show"],
    ["dlq", "stats"],
    ["dlq", "replay"],
    ["dlq", "replay-all"],
    ["dlq", "purge"],
    ["dlq", "reindex"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "graph-ingest")
def test_every_command_explains_itself(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    if command not in ([], ["stack"], ["topics"], ["db"], ["worker"]):
        assert "Example" in result.output


def readme_exit_codes() -> str:
    """The README's list of exit codes: its paragraph from "Exit codes:" on."""
    found = re.search(r"Exit codes:(.+?)(?:\n\s*\n|$)", README.read_text(), re.DOTALL)
    assert found is not None, f"{README} has no 'Exit codes:' list"
    return " ".join(found[1].split())


def test_the_readme_names_every_exit_code() -> None:
    listed = readme_exit_codes()
    unnamed = [
        f"{code.value} ({code.name})"
        for code in ExitCode
        if not re.search(rf"(?<![\d.]){code.value} [a-z(]", listed)
    ]
    assert not unnamed, f"README.md's exit codes do not name {', '.join(unnamed)}: {listed}"
