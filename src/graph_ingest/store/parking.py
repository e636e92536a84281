"""The parking port: operations that wait behind another version of their document.

A plan built on a revision its document has not reached yet is PARKED until its predecessor
commits; one that followed its predecessor to the DLQ waits there. The applier releases them (or
dead-letters them after a purged leader) through these reads, all inside its unit of work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage

ON_ITS_WAY = frozenset(
    {Stage.PREPARED, Stage.FAILED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.PARKED}
)
"""The stages of an operation that may still commit its revision without a person deciding."""


@dataclass(frozen=True, slots=True)
class StoredPlan:
    """An operation with its frozen plan and its work headers, as admission stored them."""

    operation: Operation
    plan_bytes: bytes
    work_headers: Mapping[str, str]


class ParkedOperations(Protocol):
    """The waiting operations, read (and locked) inside a unit of work."""

    def parked_behind(self, keys: Sequence[tuple[str, str, int]]) -> list[StoredPlan]:
        """Operations waiting for (space, document_id, expected_revision), with their plan:
        PARKED, or DEAD_LETTERED behind an operation they followed to the DLQ (their entry still
        pending review)."""

    def parked_on_document(self, space: str, document_id: str) -> list[tuple[Operation, bytes]]:
        """The PARKED operations of a document (locked), with their plan bytes, in revision order."""

    def dead_lettered_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[tuple[str, str], Operation]:
        """Per (space, document_id, revision): a DEAD_LETTERED operation of the document that
        expects that revision and whose DLQ entry is pending review — the one every later
        version waits behind."""

    def purged_leaders_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[tuple[str, str], Operation]:
        """Per (space, document_id, revision): a DEAD_LETTERED operation of the document that
        expects that revision and whose DLQ entry was purged (RESOLVED), when no other operation
        on its way (``ON_ITS_WAY``, or dead-lettered and not RESOLVED) expects it: that revision
        never commits, and a version waiting for a later one waits forever."""

    def waiting_behind(self, leader: Operation) -> list[Operation]:
        """The later versions of ``leader``'s document (locked): PARKED, or DEAD_LETTERED with
        their entry pending review; in revision order."""


__all__ = ["ON_ITS_WAY", "ParkedOperations", "StoredPlan"]
