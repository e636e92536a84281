"""`graph-ingest worker projector` and `projections status` explain themselves, and its settings come from the
environment (GRAPH_INGEST_PROJECTOR__*) like every worker's."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.settings import Settings

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("command", "names"),
    [
        (["worker", "projector"], "PROJECTOR__GROUP_ID"),
        (["projections", "status"], "PROJECTOR__STALLED_AFTER_S"),
    ],
)
def test_the_projector_commands_explain_themselves(command: list[str], names: str) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and names in result.output


def test_the_projector_group_is_its_own_and_set_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = Settings()
    assert defaults.projector.group_id not in {
        defaults.applier.group_id,
        defaults.planner.group_id,
    }
    monkeypatch.setenv("GRAPH_INGEST_PROJECTOR__GROUP_ID", "projectors-b")
    monkeypatch.setenv("GRAPH_INGEST_PROJECTOR__BATCH_MAX_EVENTS", "7")
    settings = Settings()
    assert (settings.projector.group_id, settings.projector.batch_max_events) == ("projectors-b", 7)
