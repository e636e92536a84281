"""Consumer lag in seconds, as the metrics show it, against a real applier process while plans keep
arriving (issue 19): it rises while the applier is stopped and falls to zero once it is back;
and it rises too while the applier is alive but its partitions are paused behind a breaker forced
open, and falls to zero once it is released — the pause librdkafka's own lag figure misses.
And a scrape while Kafka or PostgreSQL is down answers within its timeout, without that
service's figures and with its error counted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from graph_ingest.observability.lag import ConsumerLag, consumer_lag
from graph_ingest.observability.store_gauges import store_gauges
from graph_ingest.settings.scrape import ScrapeSettings
from graph_ingest.stack.manager import LocalStack
from graph_ingest.stack.process import start_bound
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.processes import stop_gracefully
from tests.unit.test_scrape_metrics import samples

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
PACE_S = 0.2
"""One plan every PACE_S while traffic flows."""
KEEPING_UP_S = 3.0
"""An applier that consumes has no partition behind by more than this (batches, commits)."""
BEHIND_S = 8.0
"""A lag this high cannot come from an applier that consumes."""


class Traffic:
    """Plans of new documents published steadily on a thread until ``stop``."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.published = 0

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(PACE_S):
            self.published += 1
            self._pipeline.publish(doc_v1(self._pipeline, f"doc-{self.published}"))


class PlansLag:
    """The applier's lag on the plans topic, as a scrape of its lag collector shows it."""

    def __init__(self, pipeline: Pipeline) -> None:
        settings = pipeline.settings
        scrape = settings.scrape.model_copy(update={"cache_s": 0.0})
        self.collector: ConsumerLag = consumer_lag(
            settings.model_copy(update={"scrape": scrape}), "applier"
        )
        self.registry = CollectorRegistry()
        self.registry.register(self.collector)
        self.group, self.topic = settings.applier.group_id, settings.topics.plans
        self.partitions = settings.topics.plan_partitions

    def read(self) -> dict[str, list[float]] | None:
        """Per unit (offsets, seconds), the lag of every plans partition; None if not read."""
        found: dict[str, dict[int, float]] = {"offsets": {}, "seconds": {}}
        for (name, labels), value in samples(self.registry).items():
            d = dict(labels)
            if d.get("group") == self.group and d.get("topic") == self.topic:
                found[name.removeprefix("graph_ingest_consumer_lag_")][int(d["partition"])] = value
        if any(len(by_partition) != self.partitions for by_partition in found.values()):
            return None
        return {unit: list(by_partition.values()) for unit, by_partition in found.items()}

    def wait(self, condition: str, timeout_s: float) -> dict[str, list[float]]:
        """The lag once ``condition`` holds: ``keeping up``, ``behind`` (some partition past
        BEHIND_S), ``caught up`` (every partition at 0 in offsets and seconds)."""
        tests: dict[str, Callable[[dict[str, list[float]]], bool]] = {
            "keeping up": lambda lag: max(lag["seconds"]) < KEEPING_UP_S,
            "behind": lambda lag: max(lag["seconds"]) > BEHIND_S,
            "caught up": lambda lag: not any(lag["offsets"]) and not any(lag["seconds"]),
        }
        test = tests[condition]

        def met() -> dict[str, list[float]] | None:
            lag = self.read()
            return lag if lag is not None and test(lag) else None

        return wait_until(
            met,
            timeout_s=timeout_s,
            interval_s=0.2,
            what=f"the applier's lag to be {condition}",
        )

    def rises(self, since: dict[str, list[float]]) -> None:
        """It keeps rising: its largest lag in seconds passes what it was by 2 s."""
        wait_until(
            lambda: (
                (lag := self.read()) is not None and max(lag["seconds"]) > max(since["seconds"]) + 2
            ),
            timeout_s=30,
            interval_s=0.2,
            what="the applier's lag to keep rising",
        )


@pytest.fixture
def plans_lag(pipeline: Pipeline) -> Iterator[PlansLag]:
    lag = PlansLag(pipeline)
    try:
        yield lag
    finally:
        lag.collector.close()


def start_applier(pipeline: Pipeline, tmp_path: Path) -> subprocess.Popen[bytes]:
    log = tmp_path / "applier.log"
    return start_bound(
        [sys.executable, "-m", "tests.crash.applier_process", str(tmp_path / "unused"), "none"],
        cwd=REPO,
        env={**os.environ, **pipeline.env()},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def applying(pipeline: Pipeline) -> None:
    """Once the applier has joined and applies: a first plan completes."""
    first = doc_v1(pipeline, "doc-0")
    pipeline.publish(first)
    pipeline.wait_stage(first.operation_id, Stage.COMPLETED, timeout_s=120)


def breaker(pipeline: Pipeline, *args: str) -> None:
    result = CliRunner().invoke(
        cli, ["breaker", *args, "neo4j", "--by", "lag-test"], env=pipeline.env()
    )
    assert result.exit_code == 0, result.output


def test_lag_rises_while_the_applier_is_stopped_and_falls_to_zero_when_it_returns(
    pipeline: Pipeline,
    plans_lag: PlansLag,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # Given an applier process keeping up with plans that keep arriving
    processes.append(start_applier(pipeline, tmp_path))
    applying(pipeline)
    traffic = Traffic(pipeline).start()
    try:
        plans_lag.wait("keeping up", timeout_s=120)
        # When it stops (and leaves its group) while plans keep arriving
        stop_gracefully(processes)
        # Then its lag in seconds rises, and keeps rising
        plans_lag.rises(since=plans_lag.wait("behind", timeout_s=60))
        # When it returns
        processes.append(start_applier(pipeline, tmp_path))
        # Then its lag falls back
        plans_lag.wait("keeping up", timeout_s=120)
    finally:
        traffic.stop()
    # and reaches zero once the traffic has stopped
    plans_lag.wait("caught up", timeout_s=60)
    assert traffic.published > 0


def test_lag_rises_while_a_forced_open_breaker_pauses_the_applier_and_falls_after_release(
    pipeline: Pipeline,
    plans_lag: PlansLag,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # Given an applier process keeping up with plans that keep arriving
    applier = start_applier(pipeline, tmp_path)
    processes.append(applier)
    applying(pipeline)
    traffic = Traffic(pipeline).start()
    try:
        plans_lag.wait("keeping up", timeout_s=120)
        # When an operator forces Neo4j's breaker open: the applier pauses its partitions
        breaker(pipeline, "open", "--reason", "lag test")
        # Then its lag in seconds rises and keeps rising, the applier alive all along
        plans_lag.rises(since=plans_lag.wait("behind", timeout_s=60))
        assert applier.poll() is None, (tmp_path / "applier.log").read_text()
        # When the breaker is released, the lag falls back
        breaker(pipeline, "release")
        plans_lag.wait("keeping up", timeout_s=120)
    finally:
        traffic.stop()
    # and reaches zero once the traffic has stopped
    plans_lag.wait("caught up", timeout_s=60)
    assert applier.poll() is None


OUTAGE_TIMEOUT_S = 2.0
"""GRAPH_INGEST_SCRAPE__TIMEOUT_S in the outage test."""


@pytest.mark.parametrize("service", ["kafka", "postgres"])
def test_a_scrape_during_an_outage_answers_fast_and_the_figures_return_after_it(
    service: str, pipeline: Pipeline, local_stack: LocalStack
) -> None:
    settings = pipeline.settings.model_copy(
        update={"scrape": ScrapeSettings(cache_s=0, timeout_s=OUTAGE_TIMEOUT_S)}
    )
    lag, gauges = consumer_lag(settings, "applier"), store_gauges(settings)
    registry = CollectorRegistry()
    registry.register(lag)
    registry.register(gauges)
    lag_series = "graph_ingest_consumer_lag_seconds"
    store_series = "graph_ingest_outbox_backlog_rows"
    errors = {
        "kafka": (
            "graph_ingest_consumer_lag_errors_total",
            (("group", settings.applier.group_id),),
        ),
        "postgres": ("graph_ingest_store_scrape_errors_total", ()),
    }[service]
    gone = {"kafka": lag_series, "postgres": store_series}[service]
    stays = {"kafka": store_series, "postgres": lag_series}[service]

    def names() -> set[str]:
        return {name for name, _ in samples(registry)}

    try:
        # Given both read once (their clients connected)
        assert {lag_series, store_series} <= names()
        # When the service crashes
        local_stack.stop_service(service, hard=True)
        try:
            started = time.monotonic()
            found = samples(registry)
            took_s = time.monotonic() - started
            # Then a scrape still answers within the timeout, without the service's figures,
            # with its error counted, and the other figures there
            assert took_s < OUTAGE_TIMEOUT_S + 1.5, took_s
            assert found[errors] >= 1
            assert gone not in {name for name, _ in found}
            assert stays in {name for name, _ in found}
        finally:
            local_stack.start_service(service)
        # and once it is back, so are its figures
        wait_until(lambda: gone in names(), timeout_s=90, what=f"{gone} after the outage")
    finally:
        lag.close()
        gauges.close()
