"""What an operator's forced mode (``domain.breaker_control``) makes of a breaker, whatever its
failures say (seed 002 §7.3):

==============  ===============  ============  ================  ========================
mode            automatic state  shown state   the loop pauses   a failure opens it
==============  ===============  ============  ================  ========================
FORCED_OPEN     any              OPEN          yes, until freed  (it is open)
FORCED_CLOSED   any              CLOSED        never             no: retried with backoff
AUTOMATIC       CLOSED/HALF/OPEN the same      while OPEN        after the threshold
==============  ===============  ============  ================  ========================

A loop asks these per round and per failure; the follower of the control topic
(``kafka.control``) says which mode holds.
"""

from __future__ import annotations

from graph_ingest.domain.breaker_control import BreakerMode
from graph_ingest.resilience.breaker import BreakerState


def effective_state(mode: BreakerMode, automatic: BreakerState) -> BreakerState:
    """The state the loop acts on and the health shows."""
    if mode is BreakerMode.FORCED_OPEN:
        return BreakerState.OPEN
    if mode is BreakerMode.FORCED_CLOSED:
        return BreakerState.CLOSED
    return automatic


def holds_paused(mode: BreakerMode) -> bool:
    """Whether the loop must pause its partitions now, before taking anything."""
    return mode is BreakerMode.FORCED_OPEN


def opens_on_failure(mode: BreakerMode) -> bool:
    """Whether an outage-class failure counts towards opening the breaker."""
    return mode is not BreakerMode.FORCED_CLOSED


__all__ = ["effective_state", "holds_paused", "opens_on_failure"]
