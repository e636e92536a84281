"""The console's workers and redrive-task pages in a real browser (Debian's chromium driven by
selenium, the fixtures of ``test_console_browser``) over real Kafka, Neo4j and PostgreSQL.

An operator sees each worker's degradation and the breakers forced by operators; and replays
every dead-lettered entry a filter selects as a redrive task: the dry run first, then the task
started at a rate, its progress bar filled and the task COMPLETED. Screenshots go to ``build/``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from graph_ingest.domain.breaker_control import BreakerMode
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.producers.breaker_control import force
from graph_ingest.settings import Settings
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.integration.test_console_browser import (
    SCREENSHOTS,
    Console,
    browser,
    serve,
)
from tests.read_view_samples import degradation_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["browser", "serve"]  # the fixtures, shared with the first browser test


def test_the_workers_page_shows_degradation_and_forced_breakers(
    pipeline: Pipeline, browser: Any, serve: Callable[[Settings], str]
) -> None:
    # Given a worker that reported its Neo4j breaker open then half-open (L1), folded by a
    # projector, and an operator who forced the Neo4j breaker open for every worker
    settings = projector_settings(pipeline)
    with DegradationPublisher(settings) as publisher:
        for event in degradation_events("applier-x"):
            publisher.publish(event)
    force(settings, "neo4j", BreakerMode.FORCED_OPEN, by="oncall", reason="neo4j upgrade")
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    projector.start()
    try:
        console = Console(browser, serve(settings))
        # When the operator opens the workers page from the navigation
        console.open("/ui")
        console.click("header nav a[href='/ui/workers']")
        # Then (live refresh shows it once the projector has folded it) the worker's level, why,
        # and which breaker is not closed
        row = console.wait_text("tr[data-worker='applier-x']", lambda t: "L1" in t, "the worker")
        assert "neo4j: half-open" in row, row
        # and each dependency's forced mode, with who and why; the other one automatic
        neo4j = console.text("tr[data-dependency='neo4j']") or ""
        assert "FORCED_OPEN" in neo4j and "oncall" in neo4j and "neo4j upgrade" in neo4j, neo4j
        assert "AUTOMATIC" in (console.text("tr[data-dependency='postgres']") or "")
        SCREENSHOTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(SCREENSHOTS / "console-workers.png"))
    finally:
        stop.set()
        projector.join(timeout=60)
