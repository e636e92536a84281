"""`graph-ingest worker projector` explains itself, and its settings come from the
environment (GRAPH_INGEST_PROJECTOR__*) like every worker's."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.settings import Settings

pytestmark = pytest.mark.timeout(30)


def test_the_projector_command_explains_itself() -> None:
    result = CliRunner().invoke(cli, ["worker", "projector", "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and "PROJECTOR__GROUP_ID" in result.output


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
