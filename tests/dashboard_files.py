"""The Grafana dashboard as the tests read it: its panels, its PromQL and the metric names it uses.

`dashboard_metric_names` is what a scrape check compares with `exposition_metric_names` of a real
process's /metrics output: both map a histogram's `_bucket`/`_sum`/`_count` series to the
histogram's name and keep a counter's `_total`, so "every metric the dashboard uses is served" is
`dashboard_metric_names(DASHBOARD) <= union of exposition_metric_names(scrape) over the processes`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.prometheus_files import promql_metric_names

DASHBOARD = (
    Path(__file__).resolve().parent.parent
    / "compose"
    / "grafana"
    / "dashboards"
    / "graph-ingest.json"
)

# Grafana's own variables, with the values a five-minute view at a 1 m step would give them.
BUILTIN_VARIABLES = {
    "__rate_interval": "5m",
    "__interval": "1m",
    "__interval_ms": "60000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}
# $name, ${name}, ${name:format}, [[name]], [[name:format]] (Grafana's forms; $1 is a regex group).
_VARIABLE = re.compile(
    r"\$\{(?P<braced>\w+)(?::[^}]*)?\}|\$(?P<plain>[A-Za-z_]\w*)|\[\[(?P<old>\w+)(?::\w+)?\]\]"
)
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<selector>.+?)\s*,\s*\w+\s*\)\s*$", re.S)


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard: a panel's target or a variable's selector."""

    where: str  # "panel 7 'Retries by tier' A" or "variable instance"
    record: str  # a recording-rule name for it, unique in the dashboard
    expr: str


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, and the panels a collapsed row holds."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = dashboard.get("templating", {}).get("list", [])
    return listed


def queries(dashboard: Mapping[str, Any]) -> list[Query]:
    """Every panel target's expression and every query variable's series selector, as written."""
    found = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            found.append(
                Query(
                    f"panel {panel['id']} {panel.get('title')!r} {target.get('refId')}",
                    f"dashboard:panel_{panel['id']}_{target.get('refId')}",
                    target.get("expr", ""),
                )
            )
    for variable in variables(dashboard):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query)
        matched = _LABEL_VALUES.match(text)
        found.append(
            Query(
                f"variable {variable['name']}",
                f"dashboard:variable_{variable['name']}",
                matched["selector"] if matched else text,
            )
        )
    return found


def variable_values(dashboard: Mapping[str, Any]) -> dict[str, str]:
    """What each variable stands for in a check: its current value, or any value for an "All"."""
    values = dict(BUILTIN_VARIABLES)
    for variable in variables(dashboard):
        current = variable.get("current", {}).get("value")
        if variable.get("includeAll"):
            values[variable["name"]] = variable.get("allValue") or ".*"
        elif isinstance(current, str) and current:
            values[variable["name"]] = current
        else:
            raise ValueError(f"variable {variable['name']!r} has no current value")
    return values


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """The expression with every variable replaced; an unknown variable raises KeyError."""

    def value(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"] or match["old"]
        if name not in values:
            raise KeyError(f"unknown dashboard variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(value, expr)


def dashboard_metric_names(path: Path = DASHBOARD) -> set[str]:
    """Every metric name the dashboard's panels and variables use (histograms by their name)."""
    names: set[str] = set()
    for query in queries(load(path)):
        names |= promql_metric_names(query.expr)
    return names


def recording_rules(dashboard: Mapping[str, Any]) -> dict[str, Any]:
    """Every expression as a recording rule, variables substituted: what `promtool check rules`
    reads to check the dashboard's PromQL."""
    values = variable_values(dashboard)
    return {
        "groups": [
            {
                "name": "graph-ingest-dashboard",
                "rules": [
                    {"record": query.record, "expr": substitute(query.expr, values)}
                    for query in queries(dashboard)
                ],
            }
        ]
    }


def panel_expression(dashboard: Mapping[str, Any], title: str, ref: str = "A") -> str:
    """The expression of one panel's target, variables substituted."""
    for panel in panels(dashboard):
        if panel.get("title") == title:
            for target in panel.get("targets", []):
                if target.get("refId") == ref:
                    return substitute(target["expr"], variable_values(dashboard))
    raise KeyError(f"no panel {title!r} with a target {ref}")
