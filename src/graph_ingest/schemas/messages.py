"""The messages graph-ingest publishes, as they leave: topic, key, value and headers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    topic: str
    key: bytes | None
    value: bytes
    headers: dict[str, str]
    operation_id: str | None = None
    sequence: int | None = None
