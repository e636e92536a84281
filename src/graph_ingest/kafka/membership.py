"""What a group consumer says of its place in its group, at INFO: that it joins, its member id,
each assignment change (partitions assigned, revoked, or lost) with what it owns after it, and
that it leaves. Every line names the group and the group protocol (classic or consumer), so an
operator can follow one rebalance across the workers' logs.

A member id is the group coordinator's name for one consumer instance (under the consumer
protocol the client makes it up before it joins). It changes when the member is fenced and
joins again: the line that sees a new one says which it replaces.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer

from graph_ingest.kafka.records import Partition

log = logging.getLogger(__name__)


def describe_partitions(partitions: Collection[Partition]) -> str:
    """``plans[0,1,2] plans.retry.1s[0]``: by topic, in order; ``nothing`` when empty."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return "nothing"
    return " ".join(
        f"{topic}[{','.join(str(p) for p in sorted(parts))}]"
        for topic, parts in sorted(by_topic.items())
    )


def member_id(consumer: Consumer) -> str | None:
    """The consumer's member id; None before it has one (or once closed)."""
    try:
        return consumer.memberid() or None
    except RuntimeError:
        return None


@dataclass(slots=True)
class Membership:
    """The membership log of one consumer of ``group`` under ``protocol``."""

    group: str
    protocol: str
    member: str | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Membership:
        """The membership of a consumer made from the librdkafka ``config``."""
        return cls(str(config.get("group.id", "")), str(config.get("group.protocol", "classic")))

    @property
    def prefix(self) -> str:
        return f"group {self.group} ({self.protocol} protocol) member {self.member or '-'}"

    def joining(self, topics: Sequence[str]) -> None:
        log.info(
            "group %s (%s protocol): joining for %s", self.group, self.protocol, ", ".join(topics)
        )

    def changed(
        self,
        consumer: Consumer,
        change: str,
        partitions: Collection[Partition],
        owned: Collection[Partition],
        paused: bool,
    ) -> None:
        """``partitions`` were ``change`` (assigned, revoked, lost); ``owned`` is what is left.
        A callback with no partition (the consumer protocol ends a revocation with an empty
        assignment) says nothing unless the member id is new."""
        previous, self.member = self.member, member_id(consumer) or self.member
        renamed = previous is not None and previous != self.member
        if not partitions and not renamed:
            return
        log.log(
            logging.WARNING if change == "lost" else logging.INFO,
            "%s%s: %s %s; owns %s%s",
            self.prefix,
            f" (was {previous})" if renamed else "",
            change,
            describe_partitions(partitions),
            describe_partitions(owned),
            " (paused)" if paused and owned else "",
        )

    def leaving(self, consumer: Consumer, owned: Collection[Partition]) -> None:
        self.member = member_id(consumer) or self.member
        log.info("%s: leaving the group, handing over %s", self.prefix, describe_partitions(owned))


__all__ = ["Membership", "describe_partitions", "member_id"]
