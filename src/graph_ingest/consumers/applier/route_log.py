"""What routing wrote while the applier applied a batch: tier copies by tier, DLQ entries by
error code, for the loop to report once the batch has its outcomes (``hooks.RoutesTaken``).

The routers note each copy and entry as they enqueue it; the applier clears the log before a
batch and the loop takes it after, both under the lock the loops share the applier by. A batch
that raises (retried in place) leaves its notes to be cleared: only the routes of a batch with
durable outcomes are reported, those of its attempts that were rolled back are not.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


def tier_label(delay_s: float) -> str:
    """A retry tier by its delay, as metrics name it: ``1s``, ``5s``, ``30s``."""
    return f"{delay_s:g}s"


@dataclass(slots=True)
class RouteLog:
    tiers: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)

    def to_tier(self, delay_s: float) -> None:
        self.tiers[tier_label(delay_s)] += 1

    def to_dlq(self, code: str) -> None:
        self.dead_letters[str(code)] += 1

    def clear(self) -> None:
        self.tiers.clear()
        self.dead_letters.clear()

    def take(self) -> tuple[dict[str, int], dict[str, int]]:
        """The notes so far, and an empty log."""
        taken = dict(self.tiers), dict(self.dead_letters)
        self.clear()
        return taken


__all__ = ["RouteLog", "tier_label"]
