"""A consumed plan message: where it came from, its raw bytes, and the decoded plan or why not."""

from __future__ import annotations

from dataclasses import dataclass

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.errors import GraphIngestError
from graph_ingest.kafka.headers import RetryHeaders

MessageHeaders = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class PlanMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    plan: IngestionPlan | None = None
    error: GraphIngestError | None = None
    operation_id_header: str | None = None
    headers: MessageHeaders = ()
    retry: RetryHeaders | None = None
    """What a retry-tier copy says about its journey; None on the main topic."""

    @property
    def position(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def context(self) -> str:
        """The fixed log prefix: topic[partition]@offset op=<id>."""
        op = self.plan.operation_id if self.plan else self.operation_id_header
        return f"{self.topic}[{self.partition}]@{self.offset} op={op}"
