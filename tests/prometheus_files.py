"""Reading compose/prometheus/: the alert rules, their promtool unit tests, and the metric names
and label matchers the rules' PromQL uses (to be checked against a real scrape of the workers).

The PromQL reader is deliberately small: it knows the language's keywords and strips strings,
label matchers, ranges and grouping clauses, which is all the rules here use.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ALERT_RULES = REPO / "compose" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "compose" / "prometheus" / "tests" / "alerts_test.yml"

# Labels Prometheus attaches to a target's series (compose/prometheus/prometheus.yml): never scraped.
TARGET_LABELS = frozenset({"job", "instance"})
# Series Prometheus makes itself for every target: never in a worker's scrape output.
PROMETHEUS_SERIES = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    }
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_TOKEN = re.compile(
    r"""
      (?P<variable>\$\{[^}]*\}|\$\w+|\[\[[\w:]+\]\])
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<number>\d[\w.]*|\.\d\w*)
    | (?P<ident>[A-Za-z_:][\w:]*)
    | (?P<space>\s+|\#[^\n]*)
    | (?P<other>.)
    """,
    re.X | re.S,
)
# Followed by a parenthesised list of label names, not of expressions.
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = _LABEL_LISTS | {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
_HISTOGRAM_SERIES = re.compile(r"_(?:bucket|sum|count)$")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class Alert:
    """One alerting rule: its name, severity label, expression and annotations."""

    name: str
    severity: str
    expr: str
    annotations: dict[str, str]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def rules(path: Path = ALERT_RULES) -> Iterator[dict[str, Any]]:
    """Every rule (recording and alerting) of every group, in file order."""
    for group in load_yaml(path)["groups"]:
        yield from group["rules"]


def alerts(path: Path = ALERT_RULES) -> list[Alert]:
    return [
        Alert(
            name=rule["alert"],
            severity=rule.get("labels", {}).get("severity", ""),
            expr=rule["expr"],
            annotations=rule.get("annotations", {}),
        )
        for rule in rules(path)
        if "alert" in rule
    ]


def recorded_names(path: Path = ALERT_RULES) -> set[str]:
    """The series the file's recording rules make (not scraped: Prometheus writes them)."""
    return {rule["record"] for rule in rules(path) if "record" in rule}


def rule_metric_names(path: Path = ALERT_RULES) -> set[str]:
    """Every metric name the rules' expressions use, recorded series of the same file excluded;
    ``up`` is among them (see :func:`scraped_metric_names`)."""
    names: set[str] = set()
    for rule in rules(path):
        names |= promql_metric_names(rule["expr"])
    return names - recorded_names(path)


def scraped_metric_names(path: Path = ALERT_RULES) -> set[str]:
    """The metric names the rules need from the workers' scrape output: each must appear in a
    real scrape (as a sample name), or the rules that use it can never fire."""
    return rule_metric_names(path) - PROMETHEUS_SERIES


def rule_label_matchers(path: Path = ALERT_RULES) -> set[tuple[str, str, str]]:
    """(metric, label, value) of every label value the rules select on a scraped metric, from
    equality matchers and from regular expressions that are plain alternations (``a|b``), e.g.
    ``("graph_ingest_dlq_entries", "status", "pending")``: a value the workers never export
    makes its rule silent forever, so check these against a real scrape too (``job`` and
    ``instance`` are Prometheus' own)."""
    found: set[tuple[str, str, str]] = set()
    for rule in rules(path):
        for metric, matchers in _SELECTOR.findall(rule["expr"]):
            if metric in PROMETHEUS_SERIES:
                continue
            for label, op, value in _MATCHER.findall(matchers):
                if label in TARGET_LABELS:
                    continue
                if op == "=":
                    found.add((metric, label, value))
                elif op == "=~" and re.fullmatch(r"\w+(?:\|\w+)*", value):
                    found |= {(metric, label, one) for one in value.split("|")}
    return found


def rule_tests(path: Path = ALERT_TESTS) -> Iterator[dict[str, Any]]:
    """Every ``alert_rule_test`` case of a promtool unit test file."""
    for group in load_yaml(path)["tests"]:
        yield from group.get("alert_rule_test", [])


def expected_severities(case: dict[str, Any]) -> set[str]:
    """The severities a promtool case expects to fire (none: it expects the alert silent)."""
    return {alert.get("exp_labels", {}).get("severity", "") for alert in case["exp_alerts"] or []}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers followed by `{` or `[` or bare,
    minus functions, aggregations, keywords and label names; `_bucket`/`_sum`/`_count` map to the
    histogram's name."""
    tokens = [
        (m.lastgroup, m.group())
        for m in _TOKEN.finditer(expr)
        if m.lastgroup not in ("space", "variable", "string")
    ]
    names: set[str] = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if text in ("{", "["):  # label matchers, a range or a subquery: no metric names inside
            i = _after(tokens, i, "}" if text == "{" else "]")
            continue
        if kind == "ident":
            if text in _LABEL_LISTS and following == "(":
                i = _after(tokens, i + 1, ")")
                continue
            # (an aggregation is followed by its arguments, or by its grouping first)
            if following not in ("(", "by", "without") and text not in _KEYWORDS:
                names.add(_HISTOGRAM_SERIES.sub("", text))
        i += 1
    return names


def _after(tokens: list[tuple[str | None, str]], start: int, closing: str) -> int:
    for j in range(start + 1, len(tokens)):
        if tokens[j][1] == closing:
            return j + 1
    raise ValueError(f"unbalanced PromQL: no {closing!r} after token {start}")


def exposition_metric_names(text: str) -> set[str]:
    """The metric names in a /metrics scrape (Prometheus text format), normalised as above."""
    names = set()
    for line in text.splitlines():
        matched = re.match(r"[A-Za-z_:][\w:]*", line)
        if matched:
            names.add(_HISTOGRAM_SERIES.sub("", matched.group()))
    return names


PROMTOOL = Path("/usr/bin/promtool")  # Debian's prometheus package; .ci/run installs it


def promtool_or_skip() -> Path:
    """promtool's path; skip without it unless under CI, which installs it: there it fails."""
    if PROMTOOL.exists():
        return PROMTOOL
    message = (
        f"{PROMTOOL} not installed (Debian: apt-get install --no-install-recommends prometheus)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must check the dashboard's PromQL: {message}")
    pytest.skip(message)


def run_promtool(*args: str) -> None:
    """``promtool ARGS`` from the repository root; fails the test with its output."""
    result = subprocess.run(
        [str(promtool_or_skip()), *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, (
        f"promtool {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
    )


def promtool_check_metrics(text: str) -> None:
    """``promtool check metrics`` accepts a scrape's ``text``: no error and no lint remark."""
    checked = subprocess.run(
        [str(promtool_or_skip()), "check", "metrics"],
        input=text.encode("utf-8"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, (checked.stdout.decode(), checked.stderr.decode())
    assert checked.stdout + checked.stderr == b"", "promtool's lint: " + checked.stdout.decode()
