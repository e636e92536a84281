"""Scraping a process's ``/metrics`` and reading it: for the metrics tests, and for the dashboard
and alert tests that check every metric they name is in a real scrape."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graph_ingest.waiting import wait_until

Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, *, timeout_s: float = 10) -> str:
    """The text a GET of ``url`` (a ``/metrics`` URL) answers; raises unless 200."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        assert response.status == 200, response.status
        return str(response.read().decode("utf-8"))


def scrape_when_up(url: str, *, timeout_s: float = 120) -> str:
    """``scrape``, once the process listens (it may still be starting)."""

    def answer() -> str | None:
        try:
            return scrape(url)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    return wait_until(answer, timeout_s=timeout_s, interval_s=0.5, what=f"{url} to answer")


def registry_text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def samples(text: str) -> Samples:
    """Every sample of an exposition: (sample name, its labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def total(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples(text).items() if n == name and wanted <= ls)


def label_values(text: str, name: str, label: str) -> dict[str, float]:
    """``name``'s samples by the value of ``label`` (summed over the other labels)."""
    values: dict[str, float] = {}
    for (n, labels), v in samples(text).items():
        if n == name:
            key = dict(labels).get(label, "")
            values[key] = values.get(key, 0.0) + v
    return values


def metric_names(text: str) -> set[str]:
    """The metric (family) names of an exposition, as PromQL names them: a counter ``x_total``
    and a histogram's ``x_bucket``, ``x_sum``, ``x_count`` included."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
    return names


__all__ = [
    "label_values",
    "metric_names",
    "registry_text",
    "sample",
    "samples",
    "scrape",
    "scrape_when_up",
    "total",
]
