"""The operator console in a real browser (Debian's chromium driven by selenium) over a real
pipeline: an applier with its relay and a projector on real Kafka, Neo4j and PostgreSQL, the API
app served by uvicorn on a free port.

An operator finds a dead-lettered operation by filter, reads its timeline, opens its DLQ entry,
gives the token, confirms the replay and watches the operation reach COMPLETED; a screenshot of
the end is saved under ``build/``. The plan is dead-lettered the way it happens (an edge to a
node that does not exist yet), and completes once another plan has created that node.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from pydantic import SecretStr
from selenium import webdriver
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from graph_ingest.api.app import create_app
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import postgres_store, run_projector
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.integration.test_dlq_cli import dangling, dead_lettered, ghosts
from tests.tcp_proxy import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build"
TOKEN_NAME, TOKEN = "oncall", "s3cret-console-token"
PAGE_WAIT_S = 60  # a loaded 2-core machine: pages and refreshes may be slow, never wrong


def _browser_or_skip() -> None:
    """Skip without chromium, unless under CI, which installs it: there its absence fails."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    message = (
        f"{', '.join(missing)} not installed (Debian: apt-get install chromium chromium-driver)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test: {message}")
    pytest.skip(message)


def test_under_ci_a_missing_browser_fails_and_elsewhere_it_skips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", Path("/nonexistent/chromium"))
    # a driver present on every machine: the message names the missing browser alone
    monkeypatch.setattr(sys.modules[__name__], "CHROMEDRIVER", Path(sys.executable))
    monkeypatch.setenv("CI", "true")
    # (BaseException: a skip where a failure belongs must fail this test, not skip it)
    with pytest.raises(BaseException) as under_ci:
        _browser_or_skip()
    assert under_ci.type is pytest.fail.Exception, under_ci.value
    assert "CI must run the browser test" in str(under_ci.value)
    monkeypatch.delenv("CI")
    with pytest.raises(BaseException) as elsewhere:
        _browser_or_skip()
    assert elsewhere.type is pytest.skip.Exception, elsewhere.value
    assert "/nonexistent/chromium not installed" in str(elsewhere.value)


@pytest.fixture
def browser() -> Iterator[Any]:
    _browser_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="console-chromium-")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        # without these three this machine refuses Chromium's connections
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(PAGE_WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def serve() -> Iterator[Callable[[Settings], str]]:
    """Serve the API app (the console mounted) for some settings; its base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(settings: Settings) -> str:
        port = free_port()
        config = uvicorn.Config(
            create_app(settings, postgres_store), host="127.0.0.1", port=port, log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="console-api", daemon=True)
        thread.start()
        servers.append((server, thread))
        wait_until(lambda: server.started, timeout_s=60, what="the API app to listen")
        return f"http://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for server, thread in servers:
            server.should_exit = True
            thread.join(timeout=30)


def with_token(settings: Settings) -> Settings:
    tokens = {TOKEN_NAME: SecretStr(TOKEN)}
    return settings.model_copy(update={"api": settings.api.model_copy(update={"tokens": tokens})})


class Console:
    """The browser on the console, patient: every look and click is retried until it works or
    the deadline passes, because live refresh replaces parts of a page under the driver."""

    def __init__(self, driver: Any, base: str) -> None:
        self.driver = driver
        self.base = base

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def text(self, css: str) -> str | None:
        try:
            text: str = self.driver.find_element(By.CSS_SELECTOR, css).text
            return text
        except (NoSuchElementException, StaleElementReferenceException):
            return None

    def attributes(self, css: str, name: str) -> list[str | None] | None:
        """An attribute of every element ``css`` selects; None if a refresh swapped them."""
        try:
            return [e.get_attribute(name) for e in self.driver.find_elements(By.CSS_SELECTOR, css)]
        except StaleElementReferenceException:
            return None

    def wait_text(self, css: str, wanted: Callable[[str], bool], what: str) -> str:
        def seen() -> str | None:
            text = self.text(css)
            return text if text is not None and wanted(text) else None

        return wait_until(seen, timeout_s=PAGE_WAIT_S, what=what)

    def click(self, css: str) -> None:
        def clicked() -> bool:
            try:
                self.driver.find_element(By.CSS_SELECTOR, css).click()
            except (
                NoSuchElementException,
                StaleElementReferenceException,
                ElementClickInterceptedException,
            ):
                return False
            return True

        wait_until(clicked, timeout_s=PAGE_WAIT_S, what=f"{css} to be clickable")

    def fill(self, css: str, value: str) -> None:
        def filled() -> bool:
            try:
                field = self.driver.find_element(By.CSS_SELECTOR, css)
                field.clear()
                field.send_keys(value)
            except (NoSuchElementException, StaleElementReferenceException):
                return False  # the page is still loading, or was swapped meanwhile
            return True

        wait_until(filled, timeout_s=PAGE_WAIT_S, what=f"{css} to be filled")

    def path(self) -> str:
        current: str = self.driver.current_url
        return current.removeprefix(self.base)


def test_an_operator_finds_a_dead_lettered_operation_and_replays_it_to_completed(
    pipeline: Pipeline, browser: Any, serve: Callable[[Settings], str]
) -> None:
    # Given an applier (with its relay) and a projector on real services, a plan dead-lettered
    # for want of a node, and that node created since
    settings = with_token(projector_settings(pipeline))
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    projector.start()
    try:
        pipeline.start_applier()
        plan = dangling(pipeline, 1, document_id="doc-console")
        entry = dead_lettered(pipeline, plan)[plan.operation_id]
        ghosts(pipeline, 1)
        console = Console(browser, serve(settings))
        op = plan.operation_id

        # When the operator filters the operations by document and stage
        console.open("/ui")
        console.fill("#operation-filters input[name=document]", "doc-console")
        Select(browser.find_element(By.NAME, "stage")).select_by_visible_text("DEAD_LETTERED")
        console.click("#operation-filters button[type=submit]")
        # (live refresh shows it once the projector has folded it), and only it: the completed
        # plan of another document is filtered out
        console.wait_text("#operations tbody", lambda t: op in t, "the operation listed")
        listed = wait_until(
            lambda: console.attributes("#operations tbody tr", "data-operation"),
            timeout_s=PAGE_WAIT_S,
            what="the listed operations",
        )
        assert listed == [op]
        console.click(f"tr[data-operation='{op}'] a")

        # Then its timeline shows the steps that led to the DLQ, and the failed attempt's trace
        console.wait_text("#stage", lambda t: t == "DEAD_LETTERED", "the timeline")
        steps = console.text("#timeline") or ""
        assert "PREPARED" in steps and "DEAD_LETTERED" in steps, steps
        assert "FAILED_PRECONDITION" in (console.text("#attempts-history") or "")

        # When they open its DLQ entry: the raw key decoded and as hex, the plan decoded
        console.click("#dlq-link")
        console.wait_text("#entry-status", lambda t: t.startswith("PENDING_REVIEW"), "the entry")
        assert console.text("#key-text") == "it/doc-console"
        assert (console.text("#key-hex") or "").startswith("00000000  69 74 2f")  # "it/"
        assert "1 edge upserts" in (console.text("#plan") or "")

        # and replay it: the confirmation asks for the token first, then says what will happen
        console.click("#replay")
        console.click("#needs-token a")
        console.fill("#token", TOKEN)
        console.click("#save-token")
        consequences = console.wait_text("#consequences", lambda t: op in t, "the consequences")
        assert f"operation {op} goes back to {settings.topics.plans}" in consequences
        assert console.text("#token-name") == TOKEN_NAME
        SCREENSHOTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(SCREENSHOTS / "console-replay-confirmation.png"))
        console.fill("#reason", "the missing node exists now")
        console.click("#confirm")

        # Then the entry is REPLAYED by the token's owner, and the operation reaches COMPLETED
        notice = console.wait_text("#notice", bool, "the replay's notice")
        assert notice.startswith(f"replayed by {TOKEN_NAME}"), notice
        console.click("#operation-link")
        console.wait_text("#stage", lambda t: t == "COMPLETED", "live refresh to show COMPLETED")
        console.wait_text("#refreshed", lambda t: t.startswith("refreshed "), "a live refresh")
        assert browser.save_screenshot(str(SCREENSHOTS / "console-replayed-operation.png"))
        assert "COMPLETED" in (console.text("#timeline") or "")
        pipeline.wait_stage(op, Stage.COMPLETED)
        replayed = pipeline.store.get_dlq_entry(entry.dlq_id)
        assert replayed is not None and replayed.status is DlqStatus.REPLAYED
    finally:
        stop.set()
        projector.join(timeout=60)
