"""The console's workers and redrive-task pages in a real browser (Debian's chromium driven by
selenium, the fixtures of ``test_console_browser``) over real Kafka, Neo4j and PostgreSQL.

An operator sees each worker's degradation and the breakers forced by operators; and replays
every dead-lettered entry a filter selects as a redrive task: the dry run first, then the task
started at a rate, its progress bar filled and the task COMPLETED. Screenshots go to ``build/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from graph_ingest.domain.breaker_control import BreakerMode
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.kafka.degradation import DegradationPublisher
from graph_ingest.producers.breaker_control import force
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.integration.test_console_browser import (
    PAGE_WAIT_S,
    SCREENSHOTS,
    TOKEN,
    TOKEN_NAME,
    Console,
    browser,
    serve,
    with_token,
)
from tests.integration.test_dlq_cli import dangling, dead_lettered, ghosts
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
    pipeline.start_projector(settings)
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


def test_an_operator_replays_all_matching_entries_as_a_task_and_sees_it_completed(
    pipeline: Pipeline, browser: Any, serve: Callable[[Settings], str]
) -> None:
    # Given three plans dead-lettered for want of their nodes, and those nodes created since
    settings = with_token(pipeline.settings)
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in (1, 2, 3)]
    entries = dead_lettered(pipeline, *plans)
    ghosts(pipeline, 1, 2, 3)
    console = Console(browser, serve(settings))

    # When the operator filters the DLQ by code and asks to replay all matching
    console.open("/ui/dlq")
    Select(browser.find_element(By.NAME, "code")).select_by_visible_text("FAILED_PRECONDITION")
    console.click("#dlq-filters button[type=submit]")
    console.wait_text("#dlq-entries tbody", lambda t: t.count("PENDING_REVIEW") == 3, "entries")
    console.click("#replay-all")
    # Then the confirmation asks for the token first, then shows the dry run: all three
    console.click("#needs-token a")
    console.fill("#token", TOKEN)
    console.click("#save-token")
    would = console.wait_text("#would-replay", lambda t: "3 entries" in t, "the dry run")
    first = min(entries.values(), key=lambda e: (e.dead_lettered_at, e.dlq_id))
    assert first.dlq_id in would, would
    assert "code=FAILED_PRECONDITION" in (console.text("#confirm-replay-all") or "")

    # When they start it at a rate, with a reason
    console.fill("#rate", "2")
    console.fill("#reason", "the missing nodes exist now")
    console.click("#confirm")

    # Then the task list shows it started by them, and live refresh fills its bar to COMPLETED
    notice = console.wait_text("#notice", bool, "the start's notice")
    assert f"started by {TOKEN_NAME}: 3 to move" in notice, notice
    task_id = notice.split()[1]
    row = f"tr[data-task='{task_id}']"
    done = console.wait_text(row, lambda t: "COMPLETED" in t, "the task COMPLETED")
    assert "moved 3 / to move 3; refused 0; failed 0" in done, done
    bar = wait_until(
        lambda: console.attributes(f"{row} progress", "value"), timeout_s=PAGE_WAIT_S, what="bar"
    )
    assert bar == ["3"]
    SCREENSHOTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOTS / "console-redrive-task.png"))
    for plan in plans:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    for entry in entries.values():
        replayed = pipeline.store.get_dlq_entry(entry.dlq_id)
        assert replayed is not None and replayed.status is DlqStatus.REPLAYED
