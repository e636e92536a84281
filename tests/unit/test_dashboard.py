"""The Grafana dashboard: a dashboard Grafana provisions, whose PromQL promtool accepts and whose
metrics are the catalogue's (issue 19, item 3)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import prometheus_files
from tests.dashboard_files import (
    DASHBOARD,
    dashboard_metric_names,
    load,
    panels,
    queries,
    recording_rules,
    substitute,
    variable_values,
    variables,
)
from tests.prometheus_files import exposition_metric_names, promql_metric_names, promtool_or_skip

pytestmark = pytest.mark.timeout(60)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The metric catalogue of issue 19 (the contract between the processes and compose/): every name
# a panel may use. Histograms by their name, counters with their _total.
CATALOGUE = frozenset(
    {
        # every process
        "graph_ingest_worker_info",
        "graph_ingest_worker_heartbeat_timestamp_seconds",
        "graph_ingest_messages_consumed_total",
        "graph_ingest_assigned_partitions",
        "graph_ingest_rebalances_total",
        "graph_ingest_consumer_lag_offsets",
        "graph_ingest_consumer_lag_seconds",
        # applier
        "graph_ingest_plans_applied_total",
        "graph_ingest_batch_size_plans",
        "graph_ingest_batch_duration_seconds",
        "graph_ingest_stage_duration_seconds",
        "graph_ingest_retries_total",
        "graph_ingest_retry_lateness_seconds",
        "graph_ingest_dlq_routed_total",
        "graph_ingest_breaker_state",
        "graph_ingest_breaker_forced",
        "graph_ingest_degradation_level",
        "graph_ingest_in_place_retries_total",
        "graph_ingest_end_to_end_seconds",
        "graph_ingest_parked_operations",
        # relay
        "graph_ingest_stage_transitions_total",
        "graph_ingest_relay_publish_duration_seconds",
        "graph_ingest_outbox_backlog_rows",
        "graph_ingest_outbox_oldest_age_seconds",
        "graph_ingest_outbox_purged_rows_total",
        "graph_ingest_outbox_purge_failures_total",
        # store gauges (applier and api)
        "graph_ingest_dlq_entries",
        "graph_ingest_dlq_oldest_pending_timestamp_seconds",
        # planner
        "graph_ingest_planner_extraction_issues_total",
        # projector
        "graph_ingest_projection_lag_seconds",
        "graph_ingest_projection_lag_offsets",
        "graph_ingest_projection_state",
        # api
        "graph_ingest_http_requests_total",
        "graph_ingest_http_request_duration_seconds",
    }
)
# Grafana's unit ids the dashboard may use (packages/grafana-data/src/valueFormats/categories.ts).
UNITS = frozenset({"s", "mps", "ops", "reqps", "eps", "short", "none", "percentunit"})


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load(DASHBOARD)


def query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in panels(dashboard) if panel.get("type") != "row"]


def test_it_is_the_provisioned_graph_ingest_dashboard(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "graph-ingest"
    assert dashboard["title"] == "graph-ingest"
    assert 36 <= dashboard["schemaVersion"] <= 41  # Grafana 10 and 11
    assert dashboard["id"] is None  # provisioning assigns it
    by_name = {variable["name"]: variable for variable in variables(dashboard)}
    assert by_name["datasource"]["type"] == "datasource"
    assert by_name["datasource"]["query"] == "prometheus"
    assert by_name["datasource"]["current"]["value"] == "prometheus"  # the provisioned uid
    for name in ("job", "instance"):
        assert by_name[name]["type"] == "query"
        assert by_name[name]["datasource"] == DATASOURCE
        assert by_name[name]["includeAll"] and by_name[name]["multi"]


def test_every_panel_has_a_title_a_datasource_a_unit_and_a_target(
    dashboard: dict[str, Any],
) -> None:
    problems = []
    for panel in query_panels(dashboard):
        name = f"panel {panel.get('id')} {panel.get('title')!r}"
        if not panel.get("title"):
            problems.append(f"{name}: no title")
        if panel.get("datasource") != DATASOURCE:
            problems.append(f"{name}: datasource {panel.get('datasource')}, not {DATASOURCE}")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if unit not in UNITS:
            problems.append(f"{name}: unit {unit!r} is not one of {sorted(UNITS)}")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"{name}: no target")
        for target in targets:
            if not target.get("expr", "").strip():
                problems.append(f"{name} {target.get('refId')}: no expression")
            if target.get("datasource", DATASOURCE) != DATASOURCE:
                problems.append(f"{name} {target.get('refId')}: {target['datasource']}")
        refs = Counter(target.get("refId") for target in targets)
        if any(count > 1 or ref is None for ref, count in refs.items()):
            problems.append(f"{name}: refIds {dict(refs)}")
    assert problems == []
    assert len(query_panels(dashboard)) >= 30


def test_ids_titles_and_variable_names_are_unique(dashboard: dict[str, Any]) -> None:
    def repeated(values: list[Any]) -> list[Any]:
        return [value for value, count in Counter(values).items() if count > 1]

    assert repeated([panel["id"] for panel in panels(dashboard)]) == []
    assert repeated([panel["title"] for panel in panels(dashboard)]) == []
    assert repeated([variable["name"] for variable in variables(dashboard)]) == []
    assert repeated([query.record for query in queries(dashboard)]) == []


def test_panels_sit_on_the_grid_without_overlapping(dashboard: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_every_selector_follows_the_job_variable_and_rates_the_rate_interval(
    dashboard: dict[str, Any],
) -> None:
    # (the lints of Grafana's dashboard-linter: a selected job narrows every panel; rate windows
    # follow the scrape interval Grafana knows of)
    problems = []
    for query in queries(dashboard):
        if query.where == "variable job":
            continue
        for selector in re.finditer(r"(graph_ingest_\w+)(\{[^}]*\})?", query.expr):
            if 'job=~"$job"' not in (selector[2] or ""):
                problems.append(f"{query.where}: {selector[0]} ignores $job")
        for window in re.finditer(r"\b(?:rate|irate|increase)\([^[]*\[([^\]]*)\]", query.expr):
            if window[1] != "$__rate_interval":
                problems.append(f"{query.where}: a window of {window[1]}")
    assert problems == []


def check_rules(rules: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    path = directory / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False), encoding="utf-8")
    return subprocess.run(
        [str(promtool_or_skip()), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_promtool_accepts_every_expression(dashboard: dict[str, Any], tmp_path: Path) -> None:
    # Given every panel target and variable selector as a recording rule, variables substituted
    rules = recording_rules(dashboard)
    count = len(rules["groups"][0]["rules"])
    # When promtool checks them
    checked = check_rules(rules, tmp_path)
    # Then it accepts every one
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output
    assert f"SUCCESS: {count} rules found" in output, output


def test_promtool_rejects_a_broken_expression(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {"name": "broken", "rules": [{"record": "dashboard:broken", "expr": "sum by (le (x)"}]}
        ]
    }
    checked = check_rules(rules, tmp_path)
    assert checked.returncode != 0
    assert "dashboard-rules.yml" in checked.stdout + checked.stderr


def test_under_ci_a_missing_promtool_fails_and_elsewhere_it_skips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prometheus_files, "PROMTOOL", Path("/nonexistent/promtool"))
    monkeypatch.setenv("CI", "true")
    # (BaseException: a skip where a failure belongs must fail this test, not skip it)
    with pytest.raises(BaseException) as under_ci:
        promtool_or_skip()
    assert under_ci.type is pytest.fail.Exception, under_ci.value
    monkeypatch.delenv("CI")
    with pytest.raises(BaseException) as elsewhere:
        promtool_or_skip()
    assert elsewhere.type is pytest.skip.Exception, elsewhere.value


def test_every_variable_is_substituted(dashboard: dict[str, Any]) -> None:
    values = variable_values(dashboard)
    for rule in recording_rules(dashboard)["groups"][0]["rules"]:
        assert "$" not in rule["expr"], rule
    assert substitute('rate(x{job=~"$job"}[$__rate_interval])', values) == 'rate(x{job=~".*"}[5m])'
    assert substitute("histogram_quantile(${quantile}, y)", values) == "histogram_quantile(0.95, y)"
    with pytest.raises(KeyError, match="nope"):
        substitute("x{a=~'$nope'}", values)


def test_every_metric_a_panel_uses_is_in_the_catalogue() -> None:
    assert dashboard_metric_names(DASHBOARD) - CATALOGUE == set()


def test_every_catalogue_metric_is_on_the_dashboard() -> None:
    assert CATALOGUE - dashboard_metric_names(DASHBOARD) == set()


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("graph_ingest_x", {"graph_ingest_x"}),
        ('sum by (topic, outcome) (rate(a_total{job=~"$job"}[$__rate_interval]))', {"a_total"}),
        ("histogram_quantile(0.95, sum(rate(h_bucket[5m])) by (le, step))", {"h"}),
        ("sum(rate(h_sum[5m])) / sum(rate(h_count[5m]))", {"h"}),
        ("a / ignoring (outcome) group_left sum by (topic) (b)", {"a", "b"}),
        ("a * on(instance) group_left(kind, group) info", {"a", "info"}),
        ('(time() - min(ts{s="}{"} > 0)) or vector(0)', {"ts"}),
        ("max_over_time(g[1h:1m] offset 5m) and bool c unless d", {"g", "c", "d"}),
        ('label_replace(z, "dst", "$1", "src", "(.*)")', {"z"}),
        ('count_values("version", build_info) @ end()', {"build_info"}),
        ('{__name__="x"}', set()),
    ],
)
def test_metric_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert promql_metric_names(expr) == names


def test_metric_names_are_read_from_a_scrape() -> None:
    scrape = (
        "# HELP graph_ingest_end_to_end_seconds Plan publish to COMPLETED\n"
        "# TYPE graph_ingest_end_to_end_seconds histogram\n"
        'graph_ingest_end_to_end_seconds_bucket{le="0.01"} 0.0\n'
        "graph_ingest_end_to_end_seconds_sum 0.0\n"
        "graph_ingest_end_to_end_seconds_count 0.0\n"
        'graph_ingest_messages_consumed_total{topic="plans",outcome="completed"} 3.0\n'
        "graph_ingest_degradation_level 0.0\n"
    )
    assert exposition_metric_names(scrape) == {
        "graph_ingest_end_to_end_seconds",
        "graph_ingest_messages_consumed_total",
        "graph_ingest_degradation_level",
    }
