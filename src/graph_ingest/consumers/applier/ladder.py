"""The retry ladder, and where a failed plan stands on it: which delivery failed, on which tier,
and where its journey began.

A message says some of it (a tier copy's retry headers); the operation's recorded failed
deliveries (``failure_attempts``) say it for every copy, including those ``resume``, ``recover``
and a release re-publish to the main topic without retry headers (issue 16 item 15).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.kafka.records import Position
from graph_ingest.resilience.policy import MAIN, REPLAY, Location, RouteKind, tier
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.settings import Settings
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.failures import FailureAttempt

Origin = tuple[str, int | None, int | None]
"""Where a DLQ entry's message came from; partition and offset unknown for a plan that followed
another to the DLQ without a delivery in hand."""

_TO_TIER = RouteKind.TIER.value


@dataclass(frozen=True, slots=True)
class Ladder:
    """The main topic, the retry tiers (topic, delay) in order, and the DLQ after them."""

    plans_topic: str
    tiers: tuple[tuple[str, float], ...]
    dlq_topic: str
    max_internal_attempts: int
    max_message_bytes: int
    """What a plan message may weigh (``topics.max_message_bytes``); a re-published plan past it
    goes as a claim-check reference."""

    @classmethod
    def of(cls, settings: Settings) -> Ladder:
        return cls(
            plans_topic=settings.topics.plans,
            tiers=tuple(settings.topics.retry_tiers),
            dlq_topic=settings.topics.dlq,
            max_internal_attempts=settings.applier.max_internal_attempts,
            max_message_bytes=settings.topics.max_message_bytes,
        )

    @property
    def tier_topics(self) -> list[str]:
        return [topic for topic, _ in self.tiers]

    @property
    def topics(self) -> list[str]:
        """Every topic a plan is consumed from."""
        return [self.plans_topic, *self.tier_topics]

    def location(self, message: PlanMessage) -> Location:
        for index, (topic, _) in enumerate(self.tiers):
            if message.topic == topic:
                return tier(index)
        if kafka_headers.header_value(message.headers, kafka_headers.DLQ_REPLAY) is not None:
            return REPLAY
        return MAIN

    def progress(
        self, message: PlanMessage, failed: Sequence[FailureAttempt]
    ) -> tuple[int, Location]:
        """The delivery of ``message`` that failed (1 for the first) and where its plan stands on
        the ladder, from ``failed``, the earlier failed deliveries of its operation, where they say
        more than the message: ``resume``, ``recover`` and a release re-publish a plan to the main
        topic without retry headers, and its INTERNAL bound and ladder position must survive that.
        """
        location = self.location(message)
        delivery = max(message.retry.attempt if message.retry else 1, len(failed) + 1)
        reached = max(
            (0 if f.tier is None else f.tier + 1 for f in failed if f.routed_to == _TO_TIER),
            default=None,
        )
        if location == REPLAY or reached is None or not self.tiers:
            return delivery, location
        reached = min(reached, len(self.tiers) - 1)  # the ladder may have been shortened since
        if location.tier_index is None or location.tier_index < reached:
            location = tier(reached)
        return delivery, location


def earlier_deliveries(
    history: Sequence[FailureAttempt], message: PlanMessage | None
) -> list[FailureAttempt]:
    """The failed deliveries of ``history`` before ``message``: a redelivery after a crash finds
    its own attempt recorded, and a plan that followed another failed no delivery of its own."""
    own = message.position if message else None
    return [f for f in history if f.source is not None and f.source != own]


def first_failed(failed: Sequence[FailureAttempt]) -> Position | None:
    return failed[0].source if failed else None


def journey_start(message: PlanMessage) -> Position:
    """Where the message's journey began: the retry headers' original position, else its own."""
    retry = message.retry
    if retry is None:
        return message.position
    return (retry.original_topic, retry.original_partition, retry.original_offset)


def known_origin(entry: DlqEntry | None) -> Origin | None:
    """Where an earlier entry of the plan came from, when it knows (an entry made when the plan
    followed another without a delivery in hand does not)."""
    if entry is None or entry.original_partition is None:
        return None
    return (entry.original_topic, entry.original_partition, entry.original_offset)


__all__ = [
    "Ladder",
    "Origin",
    "Position",
    "earlier_deliveries",
    "first_failed",
    "journey_start",
    "known_origin",
]
