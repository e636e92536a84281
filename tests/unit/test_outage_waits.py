"""Outage waits: the outages a batch was held through (``OutageWatch``), and how an operation
keeps them (the latest ``MAX_OUTAGE_WAITS``, riding on its next snapshot)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.consumers.applier.outages import OutageWatch
from graph_ingest.domain.operation import MAX_OUTAGE_WAITS, Operation, OutageWait
from graph_ingest.domain.stages import Stage

pytestmark = pytest.mark.timeout(30)

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def test_an_outage_runs_from_the_first_hold_to_the_probe_that_answered() -> None:
    now = [T0]
    watch = OutageWatch(clock=lambda: now[0])
    for minutes in (0, 1, 2):  # held behind the open breaker three times over six minutes
        now[0] = T0 + timedelta(minutes=minutes)
        watch.held("neo4j")
    assert not watch.waits  # nothing ended yet
    now[0] = T0 + timedelta(minutes=6)
    watch.answered("neo4j")
    watch.answered("postgres")  # answered without having held anything: no wait
    assert watch.waits == (OutageWait(dependency="neo4j", started_at=T0, ended_at=now[0]),)


def test_the_waits_ride_on_the_next_snapshot_and_stay_bounded() -> None:
    op = Operation.prepared(
        operation_id="op", space="s", document_id="d", expected_revision=0, fingerprint="f", at=T0
    )
    assert op.having_waited(()) is op
    waits = tuple(
        OutageWait(dependency="neo4j", started_at=T0, ended_at=T0 + timedelta(seconds=i + 1))
        for i in range(MAX_OUTAGE_WAITS + 5)
    )
    waited = op.having_waited(waits[:1])
    assert waited.sequence == op.sequence  # no event of its own
    moved = waited.transition(Stage.GRAPH_APPLIED, T0).having_waited(waits[1:])
    assert moved.waits == waits[-MAX_OUTAGE_WAITS:]
