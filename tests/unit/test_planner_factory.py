"""The default planner factory: what it needs from settings, and what it refuses to guess."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.planning.errors import GraphSchemaError
from graph_ingest.planning.metrics import PlanningMetrics
from graph_ingest.planning.request_planner import load_planner_factory
from graph_ingest.settings import Settings
from graph_ingest.settings.llm import LlmSettings
from graph_ingest.settings.planner import PlannerSettings
from graph_ingest.store.errors import StoreError
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA, build_planner
from tests.unit.planning_fakes import issue_count, request

pytestmark = pytest.mark.timeout(30)


def settings(**planner: object) -> Settings:
    return Settings().model_copy(update={"planner": PlannerSettings(**planner)})


def test_the_default_factory_is_build_planner() -> None:
    assert load_planner_factory(PlannerSettings().factory) is build_planner


def test_the_factory_path_of_earlier_releases_still_loads_the_default_factory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert load_planner_factory("graph_ingest.consumers.wiring:build_planner") is build_planner
    assert "graph_ingest.wiring:build_planner" in caplog.text


def test_without_a_graph_schema_it_names_the_setting_and_the_bundled_example() -> None:
    with pytest.raises(ConfigurationError) as raised:
        build_planner(settings())
    assert "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA" in str(raised.value)
    assert str(BUNDLED_GRAPH_SCHEMA) in str(raised.value)


def test_a_graph_schema_that_does_not_load_is_an_error_naming_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "schema.yaml"
    with pytest.raises(GraphSchemaError, match=str(missing)):
        build_planner(settings(graph_schema=missing))


def test_it_builds_without_touching_the_network() -> None:
    # Given PostgreSQL settings nothing listens on
    unreachable = settings(graph_schema=BUNDLED_GRAPH_SCHEMA).model_copy(
        update={"postgres": Settings().postgres.model_copy(update={"port": 1})}
    )
    planner = build_planner(unreachable)
    # a retraction reads the store first: unopened, it says so instead of connecting
    with pytest.raises(StoreError, match="not started"):
        planner.plan(request("a", None, kind="RETRACT"))


def test_the_llm_extractor_needs_its_endpoint_settings() -> None:
    configured = settings(graph_schema=BUNDLED_GRAPH_SCHEMA, extractor="llm")
    with pytest.raises(ConfigurationError, match="GRAPH_INGEST_LLM__MODEL"):
        build_planner(configured)
    with pytest.raises(ConfigurationError, match="GRAPH_INGEST_LLM__BASE_URL"):
        build_planner(configured.model_copy(update={"llm": LlmSettings(model="m")}))


def test_an_unknown_extractor_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="'rules' and 'llm'"):
        build_planner(settings(graph_schema=BUNDLED_GRAPH_SCHEMA, extractor="regex"))


def test_issues_are_counted_by_code() -> None:
    registry = CollectorRegistry()
    metrics = PlanningMetrics(registry)
    issues = [
        ExtractionIssue(code="MALFORMED_OUTPUT", message="not JSON"),
        ExtractionIssue(code="MALFORMED_OUTPUT", message="not JSON"),
        ExtractionIssue(code="LOW_CONFIDENCE", message="0.2"),
    ]
    metrics.record_issues(request("a", "text"), issues)
    assert issue_count(registry, "MALFORMED_OUTPUT") == 2
    assert issue_count(registry, "LOW_CONFIDENCE") == 1


def test_worker_planner_without_a_graph_schema_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GRAPH_INGEST_PLANNER__GRAPH_SCHEMA", raising=False)
    result = CliRunner().invoke(cli, ["worker", "planner"])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "GRAPH_INGEST_PLANNER__GRAPH_SCHEMA is not set" in result.output
    assert "Traceback" not in result.output
