"""An operator's word on a dependency's circuit breaker, for every worker of the group (topic
``ingestion.control``, compacted, key = the dependency): forced open, forced closed, or back to
automatic; who said it, why and when."""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, Field

from graph_ingest.domain.limits import NonEmptyText, StoredText
from graph_ingest.domain.model import FrozenModel

KNOWN_DEPENDENCIES = ("neo4j", "postgres")
"""The dependencies a worker keeps a breaker for, by the names their errors carry."""


class BreakerMode(StrEnum):
    FORCED_OPEN = "FORCED_OPEN"
    """Paused as behind an open breaker, whatever the dependency answers."""
    FORCED_CLOSED = "FORCED_CLOSED"
    """Closed, and failures do not open it (they are retried with backoff)."""
    AUTOMATIC = "AUTOMATIC"
    """The breaker follows the failures, as when nobody forced it."""


class BreakerControl(FrozenModel):
    """The latest mode an operator set for ``dependency``'s breaker."""

    dependency: NonEmptyText
    mode: BreakerMode
    by: NonEmptyText = Field(description="who set it (an operator or an API token's name)")
    reason: StoredText = Field(description="why, as the operator wrote it")
    at: AwareDatetime


__all__ = ["KNOWN_DEPENDENCIES", "BreakerControl", "BreakerMode"]
