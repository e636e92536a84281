"""The outages a batch was held through: from when a dependency's breaker was found open while
retrying it in place until a probe of that dependency answered (``worker``). The applier records
them on the held plans' operations (``Operation.waits``), so a wait that spends no attempt still
leaves its trace in the operation's history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from graph_ingest.domain.operation import OutageWait


def _utc_now() -> datetime:
    return datetime.now(UTC)


class OutageWatch:
    """The outages of one batch: each started when first seen, ended when its probe answers."""

    def __init__(self, clock: Callable[[], datetime] = _utc_now) -> None:
        self._clock = clock
        self._started: dict[str, datetime] = {}
        self._ended: list[OutageWait] = []

    def held(self, dependency: str) -> None:
        """The batch is held behind ``dependency``'s open breaker (the first time counts)."""
        self._started.setdefault(dependency, self._clock())

    def answered(self, dependency: str) -> None:
        """``dependency``'s probe answered: the outage it held the batch through is over."""
        started = self._started.pop(dependency, None)
        if started is not None:
            self._ended.append(
                OutageWait(dependency=dependency, started_at=started, ended_at=self._clock())
            )

    @property
    def waits(self) -> tuple[OutageWait, ...]:
        return tuple(self._ended)
