"""When the active relay deletes the outbox rows published longer ago than the retention
(``relay.published_retention_s``): every ``relay.purge_interval_s``, and at once again while a
statement deletes a full ``PURGE_ROWS`` (more are past their retention). Without it the outbox
kept every event ever written, values included."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.settings.relay import RelaySettings

logger = logging.getLogger(__name__)

PURGE_ROWS = 5_000
"""Published rows deleted per statement: ten of the default publishing batches, so the purge
outpaces the relay's own publishing, while one statement stays a few milliseconds."""


class PurgeSchedule:
    """The purge's clock for one relay; the first check after it is made is due."""

    def __init__(self, settings: RelaySettings, schema: str) -> None:
        self.retention_s = settings.published_retention_s
        self.limit = PURGE_ROWS
        self._interval_s = settings.purge_interval_s
        self._schema = schema
        self._next = 0.0  # monotonic

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def run(self, purge: Callable[[], int], report: Callable[[int, bool], None]) -> None:
        """Call ``purge`` (it deletes up to ``limit`` rows past ``retention_s`` and returns how
        many), ``report(deleted, failed)`` what came of it, and set the next time. A failure
        is logged and tried again after the interval: publishing goes on."""
        try:
            deleted = purge()
        except GraphIngestError as exc:
            logger.warning(
                "outbox[%s] deleting published rows failed: %s; next try in %.0fs",
                self._schema,
                exc,
                self._interval_s,
            )
            report(0, True)
            deleted = 0
        else:
            report(deleted, False)
        if deleted:
            logger.info(
                "outbox[%s] deleted %d rows published over %.0fs ago",
                self._schema,
                deleted,
                self.retention_s,
            )
        self._next = time.monotonic() + (0.0 if deleted >= self.limit else self._interval_s)


__all__ = ["PURGE_ROWS", "PurgeSchedule"]
