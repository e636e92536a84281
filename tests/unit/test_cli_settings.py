"""A bad setting is one line and exit 2 under every command that reads settings; under --json it
is one JSON object on stdout, exit 2 all the same."""

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from tests.cli_errors import json_error

JSON_COMMANDS = [
    ["stack", "status"],
    ["status", "op_x"],
    ["resume", "op_x"],
    ["recover"],
    ["reconcile"],
    ["dlq", "list"],
    ["dlq", "show", "dlq-x"],
    ["dlq", "stats"],
    ["dlq", "replay", "dlq-x"],
    ["dlq", "replay-all"],
    ["dlq", "purge", "dlq-x", "--reason", "r"],
    ["dlq", "reindex"],
    ["submit", "--space", "kb", __file__],
    ["retract", "--space", "kb", "--document-id", "notes-1"],
]
COMMANDS = [*JSON_COMMANDS, ["topics", "create"], ["db", "migrate"]]
BAD_SETTING = {"GRAPH_INGEST_STACK__KAFKA_PORT": "not-a-port"}
MESSAGE = (
    "invalid setting stack.kafka_port: "
    "Input should be a valid integer, unable to parse string as an integer"
)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_bad_setting_is_a_usage_error_in_one_line(command: list[str]) -> None:
    result = CliRunner().invoke(cli, command, env=BAD_SETTING)

    assert result.exit_code == ExitCode.USAGE, result.output
    assert result.stderr.strip().splitlines() == [f"error [INVALID_ARGUMENT]: {MESSAGE}"]
    assert result.stdout == ""


@pytest.mark.parametrize("command", JSON_COMMANDS, ids=" ".join)
def test_under_json_a_bad_setting_is_one_json_error_on_stdout(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--json"], env=BAD_SETTING)

    assert result.exit_code == ExitCode.USAGE, result.output
    assert json_error(result) == {"code": "INVALID_ARGUMENT", "exit_code": 2, "message": MESSAGE}
