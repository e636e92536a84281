"""How far a projection is behind its topic, in three units, and its state — a pure decision
over what the read tables and the topic say (``projections.lag_reader`` gathers both).

* **offsets behind**: committed messages of the topic not folded yet (a partition whose unread
  remainder is only transaction markers counts 0: nothing there will ever be delivered);
* **seconds behind**: how long the oldest unfolded message has waited, from its own Kafka
  timestamp (not interpolated from offsets); 0 when nothing waits;
* **age of the last event**: since the Kafka timestamp of the newest message folded.

============================================  ============
the projection                                state
============================================  ============
nothing unfolded                              idle
behind, its position moved within stalled_s   catching_up
behind, not moved for stalled_s (or never)    stalled
a rebuild's tables, while it builds them      rebuilding
============================================  ============

A rebuild's tables (``projections rebuild``) have a lag of their own beside the live ones': their
``progress`` says how many offsets the rebuild has folded and how many it has still to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from graph_ingest.projections.tables import FoldedUpTo


class LagState(StrEnum):
    IDLE = "idle"
    CATCHING_UP = "catching_up"
    STALLED = "stalled"
    REBUILDING = "rebuilding"


@dataclass(frozen=True, slots=True)
class RebuildProgress:
    """A rebuild's offsets folded (from offset zero, per partition) and still to fold."""

    done: int
    to_do: int


@dataclass(frozen=True, slots=True)
class Unfolded:
    """What waits in one partition: how many committed messages, and the oldest one's time."""

    messages: int
    oldest_at: datetime | None


@dataclass(frozen=True, slots=True)
class ProjectionLag:
    projection: str
    offsets_behind: int
    seconds_behind: float
    last_event_age_s: float | None
    """None before the projection folded anything."""
    state: LagState
    progress: RebuildProgress | None = None
    """Only for a rebuild's tables."""


def lag_of(
    projection: str,
    folded: Sequence[FoldedUpTo],
    waiting: Sequence[Unfolded],
    *,
    now: datetime,
    stalled_s: float,
    rebuilding: bool = False,
) -> ProjectionLag:
    """The lag of ``projection`` (``rebuilding``: of a rebuild's tables, while it runs)."""
    behind = sum(unfolded.messages for unfolded in waiting)
    oldest = min((u.oldest_at for u in waiting if u.oldest_at is not None), default=None)
    newest_event = max((f.event_at for f in folded if f.event_at is not None), default=None)
    moved = max((f.moved_at for f in folded), default=None)
    if rebuilding:
        state = LagState.REBUILDING
    elif behind == 0:
        state = LagState.IDLE
    elif moved is not None and (now - moved).total_seconds() <= stalled_s:
        state = LagState.CATCHING_UP
    else:
        state = LagState.STALLED
    return ProjectionLag(
        projection=projection,
        offsets_behind=behind,
        seconds_behind=max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
        last_event_age_s=(now - newest_event).total_seconds() if newest_event else None,
        state=state,
        progress=RebuildProgress(sum(f.offset + 1 for f in folded), behind) if rebuilding else None,
    )


__all__ = ["LagState", "ProjectionLag", "RebuildProgress", "Unfolded", "lag_of"]
