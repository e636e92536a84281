"""The documents port: committed states, their history, and the nodes and edges they claim.

A document's committed state (``domain/state.py``) moves by compare-and-set on its revision; the
node ids and edge keys it lists are what other documents' deletes must leave alone, and what
``reconcile`` compares with the graph.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.state import CommittedRevision, DocumentState


@dataclass(frozen=True, slots=True)
class CommittedElements:
    """What a document's committed state says the graph holds: the input of ``reconcile``.

    ``superseded_edge_keys`` are the edges its revision says were removed."""

    space: str
    document_id: str
    revision: int
    operation_id: str
    node_ids: tuple[str, ...] = ()
    edge_keys: tuple[EdgeKey, ...] = ()
    superseded_edge_keys: tuple[EdgeKey, ...] = ()
    kept_edge_keys: tuple[EdgeKey, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.space, self.document_id)


class DocumentWriter(Protocol):
    """The documents side of a unit of work."""

    def lock_documents(self, keys: Sequence[tuple[str, str]]) -> None:
        """Hold, until this transaction ends, the lock of each (space, document_id).

        Every apply step takes it for the documents of its batch before it reads or moves their
        revisions, so parking and releasing, fencing a graph write and committing a state never
        interleave for one document. Taken in a stable order: two appliers cannot deadlock on it."""

    def document_revisions(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], CommittedRevision]:
        """Current committed revision of each (space, document_id) that has one."""

    def in_flight_operations(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[Operation]]:
        """Per (space, document_id): the operations that may write the graph next or may have
        written it without committing (PREPARED, FAILED, GRAPH_APPLIED, STATE_COMMITTED, built on
        the document's current revision, 0 when it has none). Documents without any are left
        out."""

    def commit_document_states(self, states: Sequence[DocumentState]) -> set[tuple[str, str]]:
        """Compare-and-set each document's current state to ``state`` where its current revision is
        ``state.revision - 1`` (absent counts as 0). Also writes a history row and replaces the
        document's fact sources. Returns the keys whose CAS failed (nothing written for them)."""

    def ensure_history(self, states: Sequence[DocumentState]) -> None:
        """Insert history rows that are missing (repair after a crash between commit steps)."""

    def listed_elsewhere(
        self,
        nodes: Sequence[tuple[tuple[str, str], str]],
        edges: Sequence[tuple[tuple[str, str], EdgeKey]],
    ) -> tuple[set[tuple[tuple[str, str], str]], set[tuple[tuple[str, str], EdgeKey]]]:
        """Of these (document, node) and (document, edge) candidates, those another document's
        committed state lists (an edge: among its edges or kept edges)."""


class DocumentReader(Protocol):
    """Committed states read outside a unit of work (each call its own short read)."""

    def get_document_state(self, space: str, document_id: str) -> DocumentState | None: ...

    def document_history(self, space: str, document_id: str) -> list[DocumentState]: ...

    def iter_committed_elements(
        self, *, space: str | None = None, document_id: str | None = None, page_size: int = 500
    ) -> Iterator[list[CommittedElements]]:
        """The committed states (optionally of one space and/or one document id), in pages of at
        most ``page_size``, ordered by (space, document_id). Each page is its own short read."""
        ...

    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]:
        """The (document, edge) candidates whose edge another document's committed state lists
        among its edge keys."""
        ...

    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]:
        """The (document, node id) candidates whose node another document's committed state
        lists among its node ids."""
        ...

    def unlisted_nodes(self, node_ids: Sequence[str]) -> set[str]:
        """The node ids of ``node_ids`` that no document's committed state lists (reconcile:
        nodes the graph holds that nothing references)."""
        ...


__all__ = ["CommittedElements", "DocumentReader", "DocumentWriter"]
