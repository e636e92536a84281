"""The projector's lag as readiness shows it: read at most every few seconds, the last value
served meanwhile, an unreadable lag shown as the error (no services: the reading is stubbed)."""

from __future__ import annotations

from typing import Any

import pytest

from graph_ingest.domain.status import StatusCode
from graph_ingest.projections import lag_reader
from graph_ingest.projections.lag import LagState, ProjectionLag
from graph_ingest.projections.lag_reader import LagForReadiness
from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings
from graph_ingest.store.errors import StoreError

pytestmark = pytest.mark.timeout(10)


def test_the_lag_is_read_again_only_when_older_than_its_max_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def projections_lag(*_args: Any, **_kwargs: Any) -> list[ProjectionLag]:
        reads.append(1)
        if len(reads) == 3:
            raise StoreError("PostgreSQL away", code=StatusCode.UNAVAILABLE)
        return [ProjectionLag("p", len(reads), 0.0, None, LagState.CATCHING_UP)]

    monkeypatch.setattr(lag_reader, "projections_lag", projections_lag)
    monkeypatch.setattr(ReadTables, "start", lambda _self: None)
    now = [0.0]
    lag = LagForReadiness(Settings(), max_age_s=2.0, clock=lambda: now[0])
    assert lag()["lag"][0]["offsets_behind"] == 1
    now[0] = 1.9
    assert lag()["lag"][0]["offsets_behind"] == 1  # the last value, not read again
    now[0] = 2.0
    assert lag()["lag"][0] == {
        "projection": "p",
        "offsets_behind": 2,
        "seconds_behind": 0.0,
        "last_event_age_s": None,
        "state": "catching_up",
        "progress": None,
    }
    now[0] = 4.0
    assert lag()["lag"].startswith("unavailable: PostgreSQL away")
    assert len(reads) == 3
