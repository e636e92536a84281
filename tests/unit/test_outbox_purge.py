"""The purge's schedule (``producers.outbox_purge``): what it reports, and when it runs next."""

from __future__ import annotations

import pytest

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.producers import outbox_purge
from graph_ingest.producers.outbox_purge import PurgeSchedule
from graph_ingest.settings.relay import RelaySettings


class Reports:
    def __init__(self) -> None:
        self.seen: list[tuple[int, bool]] = []

    def __call__(self, rows: int, failed: bool) -> None:
        self.seen.append((rows, failed))


def schedule(interval_s: float = 60.0) -> PurgeSchedule:
    return PurgeSchedule(RelaySettings(purge_interval_s=interval_s), "s")


def test_a_purge_reports_the_rows_it_deleted_and_waits_the_interval() -> None:
    purges, reports = schedule(), Reports()
    assert purges.due()
    purges.run(lambda: 7, reports)
    assert reports.seen == [(7, False)]
    assert not purges.due()


def test_a_full_statement_runs_again_at_once() -> None:
    purges, reports = schedule(), Reports()
    purges.run(lambda: outbox_purge.PURGE_ROWS, reports)
    assert reports.seen == [(outbox_purge.PURGE_ROWS, False)]
    assert purges.due()


def test_a_failed_purge_is_reported_logged_and_tried_after_the_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    purges, reports = schedule(), Reports()

    def fail() -> int:
        raise GraphIngestError("connection refused")

    purges.run(fail, reports)
    assert reports.seen == [(0, True)]
    assert not purges.due()
    assert "deleting published rows failed: connection refused; next try in 60s" in caplog.text
