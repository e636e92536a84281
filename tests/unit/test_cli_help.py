import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli

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
