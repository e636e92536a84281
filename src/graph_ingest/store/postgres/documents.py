"""The documents port on PostgreSQL: revisions, committed states and the elements they claim."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision, DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.documents import CommittedElements
from graph_ingest.store.errors import StoreError
from graph_ingest.store.postgres import documents_sql as sql
from graph_ingest.store.postgres.document_rows import (
    claimed_edge_columns,
    claimed_node_columns,
    committed_elements_from_row,
    fact_source_columns,
    state_columns,
    state_from_row,
)
from graph_ingest.store.postgres.fragments import lock_keys
from graph_ingest.store.postgres.operation_rows import operation_from_row
from graph_ingest.store.postgres.params import DocumentKey, key_columns
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated

# Stages of an operation that may still write the graph, or may have written it uncommitted.
IN_FLIGHT_STAGES = (Stage.PREPARED, Stage.FAILED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED)


class PostgresDocumentWriter(TransactionSession):
    """``DocumentWriter`` in a unit of work."""

    @translated
    def lock_documents(self, keys: Sequence[DocumentKey]) -> None:
        unique = sorted(set(keys))
        if unique:
            self._execute(sql.LOCK_DOCUMENTS, lock_keys(unique))

    @translated
    def document_revisions(
        self, keys: Sequence[DocumentKey]
    ) -> dict[DocumentKey, CommittedRevision]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        found = self._fetch(sql.DOCUMENT_REVISIONS, key_columns(("space", "document_id"), unique))
        return {
            (row["space"], row["document_id"]): CommittedRevision(
                space=row["space"],
                document_id=row["document_id"],
                revision=row["revision"],
                operation_id=row["operation_id"],
            )
            for row in found
        }

    @translated
    def in_flight_operations(
        self, keys: Sequence[DocumentKey]
    ) -> dict[DocumentKey, list[Operation]]:
        unique = sorted(set(keys))
        if not unique:
            return {}
        found = self._fetch(
            sql.IN_FLIGHT_OPERATIONS,
            {
                **key_columns(("space", "document_id"), unique),
                "stages": [stage.value for stage in IN_FLIGHT_STAGES],
            },
        )
        in_flight: dict[DocumentKey, list[Operation]] = {}
        for row in found:
            in_flight.setdefault((row["space"], row["document_id"]), []).append(
                operation_from_row(row)
            )
        return in_flight

    @translated
    def commit_document_states(self, states: Sequence[DocumentState]) -> set[DocumentKey]:
        if not states:
            return set()
        check_commit_batch(states)
        stamped = stamp_committed_at(states)
        # Revision 0 can never be the result of a compare-and-set: treat it as a failed one.
        candidates = [s for s in stamped if s.revision >= 1]
        committed: set[DocumentKey] = set()
        if candidates:
            found = self._fetch(sql.COMMIT_DOCUMENT_STATES, state_columns(candidates))
            committed = {(row["space"], row["document_id"]) for row in found}
        with_facts = [
            s for s in candidates if (s.space, s.document_id) in committed and s.fact_sources
        ]
        if with_facts:
            self._execute(sql.INSERT_FACT_SOURCES, fact_source_columns(with_facts))
        return {(s.space, s.document_id) for s in states} - committed

    @translated
    def ensure_history(self, states: Sequence[DocumentState]) -> None:
        if states:
            self._execute(sql.ENSURE_HISTORY, state_columns(stamp_committed_at(states)))

    @translated
    def listed_elsewhere(
        self,
        nodes: Sequence[tuple[DocumentKey, str]],
        edges: Sequence[tuple[DocumentKey, EdgeKey]],
    ) -> tuple[set[tuple[DocumentKey, str]], set[tuple[DocumentKey, EdgeKey]]]:
        found_nodes = self._fetch(sql.CLAIMED_NODES, claimed_node_columns(nodes)) if nodes else []
        found_edges = self._fetch(sql.CLAIMED_EDGES, claimed_edge_columns(edges)) if edges else []
        return (
            {nodes[row["ord"] - 1] for row in found_nodes},
            {edges[row["ord"] - 1] for row in found_edges},
        )


class PostgresDocumentReader(PooledReads):
    """``DocumentReader``: each call its own short read."""

    @translated
    def get_document_state(self, space: str, document_id: str) -> DocumentState | None:
        row = self._fetch_one(sql.GET_DOCUMENT_STATE, (space, document_id))
        return None if row is None else state_from_row(row)

    @translated
    def document_history(self, space: str, document_id: str) -> list[DocumentState]:
        found = self._fetch_all(sql.DOCUMENT_HISTORY, (space, document_id))
        return [DocumentState.model_validate(row["state"]) for row in found]

    @translated
    def iter_committed_elements(
        self, *, space: str | None = None, document_id: str | None = None, page_size: int = 500
    ) -> Iterator[list[CommittedElements]]:
        if page_size < 1:
            raise StoreError(
                f"page_size must be at least 1, not {page_size}", code=StatusCode.INVALID_ARGUMENT
            )
        after = ("", "")
        while True:
            page = self._committed_elements_page(space, document_id, after, page_size)
            if page:
                yield page
            if len(page) < page_size:
                return
            after = page[-1].key

    @translated
    def _committed_elements_page(
        self, space: str | None, document_id: str | None, after: tuple[str, str], limit: int
    ) -> list[CommittedElements]:
        found = self._fetch_all(
            sql.COMMITTED_ELEMENTS_PAGE,
            {
                "space": space,
                "document_id": document_id,
                "after_space": after[0],
                "after_document_id": after[1],
                "limit": limit,
            },
        )
        return [committed_elements_from_row(row) for row in found]

    @translated
    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]:
        if not candidates:
            return set()
        found = self._fetch_all(sql.CLAIMED_EDGES, claimed_edge_columns(candidates))
        return {candidates[row["ord"] - 1] for row in found}

    @translated
    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]:
        if not candidates:
            return set()
        found = self._fetch_all(sql.CLAIMED_NODES, claimed_node_columns(candidates))
        return {candidates[row["ord"] - 1] for row in found}

    @translated
    def unlisted_nodes(self, node_ids: Sequence[str]) -> set[str]:
        if not node_ids:
            return set()
        found = self._fetch_all(sql.UNLISTED_NODES, {"node_id": sorted(set(node_ids))})
        return {row["node_id"] for row in found}


def check_commit_batch(states: Sequence[DocumentState]) -> None:
    """One state per document per call (each state's own identities are unique by the model)."""
    seen: set[DocumentKey] = set()
    for state in states:
        key = (state.space, state.document_id)
        if key in seen:
            raise StoreError(
                f"document {state.space}/{state.document_id} appears twice in one commit",
                code=StatusCode.INVALID_ARGUMENT,
            )
        seen.add(key)


def stamp_committed_at(states: Sequence[DocumentState]) -> list[DocumentState]:
    """States without a commit time get the same 'now' (UTC)."""
    now = datetime.now(UTC)
    return [s if s.committed_at else s.model_copy(update={"committed_at": now}) for s in states]
