"""The operations port: create, lock and move operations with their frozen plans.

An operation is one plan's journey (``domain/operation.py``); the store keeps its newest snapshot,
its frozen plan bytes and the work headers it was admitted with. Every snapshot saved is also an
event in the outbox, in the same transaction (``OperationWriter.save_operations``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from graph_ingest.domain.operation import Operation

OperationEventEncoder = Callable[[Operation], bytes]


@dataclass(frozen=True, slots=True)
class NewOperation:
    operation: Operation
    plan_bytes: bytes
    work_headers: Mapping[str, str] = field(default_factory=dict)
    """The headers that say whose work it is (``schemas.headers.WORK_HEADERS``), as first admitted:
    every re-send of the plan carries them."""
    first_delivery: tuple[str, int, int] | None = None
    """Where the plan's journey began (topic, partition, offset), as first admitted."""


class OperationWriter(Protocol):
    """The operations side of a unit of work."""

    def insert_operations(self, new: Sequence[NewOperation]) -> None:
        """Create operations with their frozen plans; an existing operation_id is left untouched
        (first writer wins) and does not emit any event."""

    def lock_operations(self, operation_ids: Sequence[str]) -> dict[str, Operation]:
        """Read (SELECT … FOR UPDATE) the operations that exist, keyed by id."""

    def save_operations(self, operations: Sequence[Operation]) -> None:
        """Persist new snapshots (stage, sequence, attempts, error, times) and write each one as an
        event to the outbox for the operations topic in this same transaction. A snapshot whose
        sequence is not exactly stored+1 raises StoreError (a zombie lost a race)."""

    def first_deliveries(self, operation_ids: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        """Where each operation's plan was first delivered, for those admitted with one."""

    def graph_applied_plans(self, spaces: Sequence[str]) -> list[tuple[tuple[str, str], bytes]]:
        """The frozen plans of the operations at GRAPH_APPLIED in these spaces (written to the
        graph, their state not committed yet), by document."""


class OperationReader(Protocol):
    """Operations read outside a unit of work (each call its own short read)."""

    def get_operation(self, operation_id: str) -> Operation | None: ...

    def get_plan_bytes(self, operation_id: str) -> bytes | None: ...

    def get_work_headers(self, operation_id: str) -> dict[str, str]:
        """The work headers admission stored with the operation; empty when it has none."""
        ...

    def plan_bytes_of(self, operation_ids: Sequence[str]) -> dict[str, bytes]:
        """The frozen plan bytes of each operation that exists, keyed by id."""
        ...


__all__ = ["NewOperation", "OperationEventEncoder", "OperationReader", "OperationWriter"]
