"""The lag of a projection as a pure decision: each state, and the three units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.projections.lag import LagState, RebuildProgress, Unfolded, lag_of
from graph_ingest.projections.tables import FoldedUpTo

pytestmark = pytest.mark.timeout(30)

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


def folded(moved_s_ago: float, event_s_ago: float = 100.0) -> FoldedUpTo:
    return FoldedUpTo(
        partition=("ops", 0),
        offset=9,
        event_at=NOW - timedelta(seconds=event_s_ago),
        moved_at=NOW - timedelta(seconds=moved_s_ago),
    )


def test_nothing_unfolded_is_idle_however_long_ago_it_moved() -> None:
    lag = lag_of("p", [folded(moved_s_ago=3600)], [], now=NOW, stalled_s=60)
    assert (lag.state, lag.offsets_behind, lag.seconds_behind) == (LagState.IDLE, 0, 0.0)
    assert lag.last_event_age_s == 100.0


def test_behind_and_moving_is_catching_up_with_its_oldest_waiting_event() -> None:
    waiting = [
        Unfolded(3, NOW - timedelta(seconds=7)),
        Unfolded(2, NOW - timedelta(seconds=12)),
    ]
    lag = lag_of("p", [folded(moved_s_ago=1)], waiting, now=NOW, stalled_s=60)
    assert (lag.state, lag.offsets_behind, lag.seconds_behind) == (
        LagState.CATCHING_UP,
        5,
        12.0,
    )


@pytest.mark.parametrize("progress", [[folded(moved_s_ago=61)], []], ids=["still", "never"])
def test_behind_and_not_moving_is_stalled(progress: list[FoldedUpTo]) -> None:
    lag = lag_of("p", progress, [Unfolded(1, None)], now=NOW, stalled_s=60)
    assert lag.state is LagState.STALLED
    assert lag.offsets_behind == 1
    assert lag.last_event_age_s == (100.0 if progress else None)


def test_a_rebuilds_tables_are_rebuilding_with_the_offsets_done_and_to_do() -> None:
    progress = [folded(moved_s_ago=3600), FoldedUpTo(("ops", 1), 4, None, NOW)]
    lag = lag_of("p", progress, [Unfolded(7, None)], now=NOW, stalled_s=60, rebuilding=True)
    assert lag.state is LagState.REBUILDING
    assert lag.progress == RebuildProgress(done=10 + 5, to_do=7)
    assert lag_of("p", progress, [], now=NOW, stalled_s=60).progress is None
