"""A bad setting is one line and exit 2 under every command that reads settings."""

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli

COMMANDS = [
    ["stack", "status"],
    ["status", "op_x"],
    ["resume", "op_x"],
    ["recover"],
    ["reconcile"],
    ["topics", "create"],
    ["db", "migrate"],
    ["dlq", "list"],
    ["dlq", "show", "dlq-x"],
    ["dlq", "stats"],
    ["dlq", "replay", "dlq-x"],
    ["dlq", "replay-all"],
    ["dlq", "purge", "dlq-x", "--reason", "r"],
    ["dlq", "reindex"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_bad_setting_is_a_usage_error_in_one_line(command: list[str]) -> None:
    result = CliRunner().invoke(cli, command, env={"GRAPH_INGEST_STACK__KAFKA_PORT": "not-a-port"})

    assert result.exit_code == ExitCode.USAGE, result.output
    assert result.stderr.strip().splitlines() == [
        "error: invalid setting stack.kafka_port: "
        "Input should be a valid integer, unable to parse string as an integer"
    ]
