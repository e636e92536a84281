"""The alert rules (compose/prometheus/alerts.yml) pass promtool's checks and unit tests, and the
unit tests cover every alert: for each alert name and severity, a case where it fires and one
where it stays silent.

promtool comes from Debian's prometheus package (`.ci/run` installs it): without it these tests
skip on a developer's machine and fail in CI (``CI=true``).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.prometheus_files import (
    ALERT_RULES,
    ALERT_TESTS,
    REPO,
    alerts,
    expected_severities,
    promql_metric_names,
    recorded_names,
    rule_label_matchers,
    rule_metric_names,
    rule_tests,
    run_promtool,
    scraped_metric_names,
)

pytestmark = pytest.mark.timeout(120)

SEVERITIES = {"warning", "critical"}
# A target's `up == 0` has no value worth printing: its labels say which target.
VALUELESS = {"GraphIngestWorkerDown"}
RUNBOOK_COMMANDS = ("graph-ingest ", "docker compose ")


def test_promtool_checks_the_rules() -> None:
    run_promtool("check", "rules", str(ALERT_RULES.relative_to(REPO)))


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    run_promtool("test", "rules", str(ALERT_TESTS.relative_to(REPO)))


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    cases_by_alert: dict[str, list[set[str]]] = defaultdict(list)
    for case in rule_tests():
        cases_by_alert[case["alertname"]].append(expected_severities(case))

    missing = []
    for alert in alerts():
        cases = cases_by_alert.get(alert.name, [])
        if not any(alert.severity in fired for fired in cases):
            missing.append(f"{alert.name} ({alert.severity}): no case where it fires")
        if not any(alert.severity not in fired for fired in cases):
            missing.append(f"{alert.name} ({alert.severity}): no case where it stays silent")
    assert not missing, "\n".join(missing)


def test_the_unit_tests_name_only_alerts_that_exist() -> None:
    names = {alert.name for alert in alerts()}
    assert {case["alertname"] for case in rule_tests()} <= names


def test_every_alert_has_a_severity_and_says_what_to_run() -> None:
    for alert in alerts():
        assert alert.severity in SEVERITIES, alert
        assert set(alert.annotations) == {"summary", "description"}, alert
        assert alert.name in VALUELESS or "$value" in alert.annotations["description"], alert
        assert any(cmd in alert.annotations["description"] for cmd in RUNBOOK_COMMANDS), alert


def test_the_rules_use_catalogue_metrics_only() -> None:
    """Names of the issue 19 metric catalogue; a typo would make a rule silent forever."""
    assert scraped_metric_names() == {
        "graph_ingest_breaker_state",
        "graph_ingest_consumer_lag_seconds",
        "graph_ingest_dlq_entries",
        "graph_ingest_dlq_oldest_pending_timestamp_seconds",
        "graph_ingest_messages_consumed_total",
        "graph_ingest_outbox_backlog_rows",
        "graph_ingest_outbox_purge_failures_total",
        "graph_ingest_projection_lag_seconds",
        "graph_ingest_projection_state",
        "graph_ingest_worker_heartbeat_timestamp_seconds",
    }
    assert rule_metric_names() - scraped_metric_names() == {"up"}
    assert all(name.startswith("graph_ingest:") for name in recorded_names())
    assert rule_label_matchers() == {
        ("graph_ingest_breaker_state", "state", "open"),
        ("graph_ingest_dlq_entries", "status", "pending"),
        ("graph_ingest_messages_consumed_total", "outcome", "dead_lettered"),
        ("graph_ingest_messages_consumed_total", "outcome", "retrying"),
        ("graph_ingest_projection_state", "state", "stalled"),
    }


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('up{job=~"applier|api"} == 0', {"up"}),
        (
            'sum by (code) (rate(a_total{x="by(b)"}[5m] offset 1h)) / on (c) group_left (d) b',
            {"a_total", "b"},
        ),
        ("time() - max(ts_seconds > 0) > 1e3 and rec:name unless inf", {"ts_seconds", "rec:name"}),
        ("max without (instance) (g) and ignoring (state) h{state='x'} == 1", {"g", "h"}),
    ],
)
def test_promql_metric_names(expr: str, names: set[str]) -> None:
    assert promql_metric_names(expr) == names
