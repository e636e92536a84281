"""Batch selection and offset tracking: pure logic, no Kafka.

A batch holds at most one plan per document (a later plan waits for the next batch, which keeps
revision order) and no plan that deletes what another plan of the batch upserts, or the reverse
(the graph writer orders deletes before upserts for the whole batch, which would otherwise change
the outcome).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graph_ingest.consumers.messages import PlanMessage
from graph_ingest.domain.mutation import EdgeKey


@dataclass
class _Footprint:
    documents: set[tuple[str, str]] = field(default_factory=set)
    upserted_nodes: set[tuple[str, str]] = field(default_factory=set)
    deleted_nodes: set[tuple[str, str]] = field(default_factory=set)
    upserted_edges: set[tuple[str, EdgeKey]] = field(default_factory=set)
    deleted_edges: set[tuple[str, EdgeKey]] = field(default_factory=set)


def select_batch(
    pending: Sequence[PlanMessage], max_plans: int, max_bytes: int
) -> tuple[list[PlanMessage], list[PlanMessage]]:
    """Split ``pending`` (in arrival order) into (batch, deferred).

    Undecodable messages always join the batch: they only need to be recorded as rejected.
    A deferred plan also defers every later plan of its document, so revision order holds.
    """
    batch: list[PlanMessage] = []
    deferred: list[PlanMessage] = []
    seen = _Footprint()
    deferred_documents: set[tuple[str, str]] = set()
    size = 0
    for message in pending:
        plan = message.plan
        if plan is None:
            batch.append(message)
            continue
        document = (plan.space, plan.document_id)
        graph = plan.graph.database + "/" + plan.graph.node_label
        mutation = plan.mutation
        nodes_up = {(graph, n.node_id) for n in mutation.node_upserts}
        nodes_del = {(graph, n) for n in mutation.node_deletes}
        edges_up = {(graph, e.key) for e in mutation.edge_upserts}
        edges_del = {(graph, e) for e in mutation.edge_deletes}
        value_size = len(message.value or b"")
        blocked = (
            len(batch) >= max_plans
            or (bool(batch) and size + value_size > max_bytes)
            or document in seen.documents
            or document in deferred_documents
            or not nodes_up.isdisjoint(seen.deleted_nodes)
            or not nodes_del.isdisjoint(seen.upserted_nodes)
            or not edges_up.isdisjoint(seen.deleted_edges)
            or not edges_del.isdisjoint(seen.upserted_edges)
        )
        if blocked:
            deferred.append(message)
            deferred_documents.add(document)
            continue
        batch.append(message)
        size += value_size
        seen.documents.add(document)
        seen.upserted_nodes |= nodes_up
        seen.deleted_nodes |= nodes_del
        seen.upserted_edges |= edges_up
        seen.deleted_edges |= edges_del
    return batch, deferred


class OffsetTracker:
    """Per partition, the offset up to which every consumed message has a durable outcome."""

    def __init__(self) -> None:
        self._in_flight: dict[tuple[str, int], set[int]] = {}
        self._highest_seen: dict[tuple[str, int], int] = {}

    def consumed(self, messages: Iterable[PlanMessage]) -> None:
        for m in messages:
            tp = (m.topic, m.partition)
            self._in_flight.setdefault(tp, set()).add(m.offset)
            self._highest_seen[tp] = max(self._highest_seen.get(tp, -1), m.offset)

    def done(self, messages: Iterable[PlanMessage]) -> None:
        for m in messages:
            self._in_flight.get((m.topic, m.partition), set()).discard(m.offset)

    def committable(self) -> dict[tuple[str, int], int]:
        """Next offset to commit per partition (Kafka commits the offset of the next message)."""
        positions = {}
        for tp, highest in self._highest_seen.items():
            in_flight = self._in_flight.get(tp)
            positions[tp] = min(in_flight) if in_flight else highest + 1
        return positions

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop revoked partitions: their uncommitted messages go to the next owner."""
        for tp in partitions:
            self._in_flight.pop(tp, None)
            self._highest_seen.pop(tp, None)
