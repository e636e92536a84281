"""A worker's degradation level and the event that reports a change of it (topic
``ingestion.degradation``); the level is decided in ``resilience.degradation``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, Field

from graph_ingest.domain.limits import NonEmptyText, StoredText
from graph_ingest.domain.model import FrozenModel


class DegradationLevel(StrEnum):
    L0 = "L0"
    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class DegradationEvent(FrozenModel):
    """A change of a worker's reported degradation level (topic ``ingestion.degradation``)."""

    worker_id: NonEmptyText
    level: DegradationLevel
    previous_level: DegradationLevel
    reason: StoredText = Field(description="which breakers are not closed, or why it recovered")
    at: AwareDatetime
