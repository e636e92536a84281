"""The logging a command sets up, seen from outside (a fresh interpreter: pytest owns this one's
logging): levels per kind of command, JSON lines, the Kafka client de-duplicated, secrets masked;
and the log settings on the command line."""

import subprocess
import sys
import textwrap

import orjson
import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli

SCRIPT = textwrap.dedent(
    """
    import logging, warnings
    from graph_ingest.observability.logs import (
        bind_worker, configure_logging, redactor, worker_verbosity,
    )
    from graph_ingest.settings.logs import LogSettings

    configure_logging(LogSettings(format="json"), verbosity=0)
    redactor.add(["pg-secret"])
    ours = logging.getLogger("graph_ingest.test")
    ours.info("one-shot: hidden")
    worker_verbosity()
    bind_worker(kind="applier", worker_id="w-1")
    ours.info("worker: shown, password pg-secret")
    logging.getLogger("httpx").info("a library's info: hidden")
    client = logging.getLogger("graph_ingest.kafka.client")
    for i in range(100):
        client.error("FAIL [rdkafka#consumer-%d] connect failed after %dms", 1, i)
    warnings.warn("a library warning")
    """
)


def run_script() -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    return [orjson.loads(line) for line in done.stderr.splitlines()]


def test_a_worker_logs_its_own_info_lines_as_json_and_the_client_once() -> None:
    records = run_script()
    messages = [str(r["message"]) for r in records]
    assert messages[0] == "worker: shown, password ***"
    assert messages[1] == "FAIL [rdkafka#consumer-1] connect failed after 0ms"
    # the 99 repeats are counted when the interval ends (here: at exit)
    assert "(repeated 99 times in" in messages[-1]
    assert any("a library warning" in m for m in messages)
    assert len(records) == 4
    assert all(r["worker_id"] == "w-1" for r in records)


def test_an_invalid_log_setting_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["topics", "--help"], env={"GRAPH_INGEST_LOG__FORMAT": "xml"})
    assert result.exit_code == ExitCode.USAGE
    assert "invalid setting log.format" in result.output


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_log_format_option(log_format: str) -> None:
    result = CliRunner().invoke(cli, ["--log-format", log_format, "topics", "--help"])
    assert result.exit_code == 0, result.output
    bad = CliRunner().invoke(cli, ["--log-format", "xml", "topics", "--help"])
    assert bad.exit_code == ExitCode.USAGE
