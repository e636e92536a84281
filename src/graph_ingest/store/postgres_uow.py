"""The PostgreSQL unit of work: one connection, one transaction, one set statement per call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision, DocumentState, EntityRegistration
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.store import postgres_rows as rows
from graph_ingest.store import postgres_sql as sql
from graph_ingest.store.base import (
    DlqEntry,
    FailureAttempt,
    NewOperation,
    OperationEventEncoder,
    PlanClaim,
    Replan,
    StoredPlan,
    StoreError,
    Submission,
)
from graph_ingest.store.errors import translated
from graph_ingest.store.registry_rules import (
    check_against_existing,
    merge_within_call,
    reassignment,
    registry_key,
)

DocumentKey = tuple[str, str]

# Stages of an operation that may still write the graph, or may have written it uncommitted.
IN_FLIGHT_STAGES = (Stage.PREPARED, Stage.FAILED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED)


class PostgresUnitOfWork:
    """Implements ``UnitOfWork`` on a connection whose transaction the store opens and ends.

    Each method costs one statement for the whole list (two for ``commit_document_states`` when
    there are fact sources; the registry adds a lock and a check). Methods that raise leave
    nothing of their own call written: their writes run inside a savepoint.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        event_encoder: OperationEventEncoder,
        operations_topic: str,
    ) -> None:
        self._conn = conn
        self._cur: psycopg.Cursor[DictRow] = conn.cursor(row_factory=dict_row)
        self._encode = event_encoder
        self._topic = operations_topic

    # -- documents and operations -----------------------------------------------------------

    @translated
    def lock_documents(self, keys: Sequence[DocumentKey]) -> None:
        unique = sorted(set(keys))
        if unique:
            self._execute(
                sql.LOCK_DOCUMENTS,
                rows.key_columns(("space", "document_id"), unique),
            )

    @translated
    def insert_operations(self, new: Sequence[NewOperation]) -> None:
        first = {n.operation.operation_id: n for n in reversed(new)}  # first occurrence wins
        unique = [n for n in new if first[n.operation.operation_id] is n]
        if not unique:
            return
        values = [(n, self._encode(n.operation)) for n in unique]
        self._execute(
            sql.INSERT_OPERATIONS, {**rows.new_operation_columns(values), "topic": self._topic}
        )

    @translated
    def lock_operations(self, operation_ids: Sequence[str]) -> dict[str, Operation]:
        if not operation_ids:
            return {}
        found = self._fetch(sql.LOCK_OPERATIONS, {"operation_id": sorted(set(operation_ids))})
        return {row["operation_id"]: rows.operation_from_row(row) for row in found}

    @translated
    def save_operations(self, operations: Sequence[Operation]) -> None:
        if not operations:
            return
        chains = snapshot_chains(operations)
        latest = [(chain[-1], chain[0].sequence - 1) for chain in chains.values()]
        events = [(op, self._encode(op)) for op in operations]
        params = {
            **rows.saved_operation_columns(latest),
            **rows.event_columns(events),
            "topic": self._topic,
        }
        with self._savepoint():
            updated = {row["operation_id"] for row in self._fetch(sql.SAVE_OPERATIONS, params)}
            lost = {op_id: chain for op_id, chain in chains.items() if op_id not in updated}
            if lost:
                raise self._lost_race(lost)

    def _lost_race(self, lost: Mapping[str, list[Operation]]) -> StoreError:
        stored = {
            row["operation_id"]: row["sequence"]
            for row in self._fetch(sql.LOCK_OPERATIONS, {"operation_id": sorted(lost)})
        }
        details = []
        for op_id, chain in sorted(lost.items())[:5]:
            expected = chain[0].sequence - 1
            actual = stored.get(op_id)
            found = "does not exist" if actual is None else f"is at sequence {actual}"
            details.append(
                f"operation {op_id} {found}; snapshot {chain[0].sequence} expects {expected}"
            )
        code = StatusCode.ABORTED if stored else StatusCode.NOT_FOUND
        return StoreError(
            f"stale operation snapshot ({len(lost)} of them; another worker moved them on?): "
            + "; ".join(details),
            code=code,
        )

    # -- documents ---------------------------------------------------------------------------

    @translated
    def document_revisions(
        self, keys: Sequence[DocumentKey]
    ) -> dict[DocumentKey, CommittedRevision]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        found = self._fetch(
            sql.DOCUMENT_REVISIONS, rows.key_columns(("space", "document_id"), unique)
        )
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
                **rows.key_columns(("space", "document_id"), unique),
                "stages": [stage.value for stage in IN_FLIGHT_STAGES],
            },
        )
        in_flight: dict[DocumentKey, list[Operation]] = {}
        for row in found:
            in_flight.setdefault((row["space"], row["document_id"]), []).append(
                rows.operation_from_row(row)
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
            found = self._fetch(sql.COMMIT_DOCUMENT_STATES, rows.state_columns(candidates))
            committed = {(row["space"], row["document_id"]) for row in found}
        with_facts = [
            s for s in candidates if (s.space, s.document_id) in committed and s.fact_sources
        ]
        if with_facts:
            self._execute(sql.INSERT_FACT_SOURCES, rows.fact_source_columns(with_facts))
        return {(s.space, s.document_id) for s in states} - committed

    @translated
    def ensure_history(self, states: Sequence[DocumentState]) -> None:
        if states:
            self._execute(sql.ENSURE_HISTORY, rows.state_columns(stamp_committed_at(states)))

    # -- registry ----------------------------------------------------------------------------

    @translated
    def first_deliveries(self, operation_ids: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        if not operation_ids:
            return {}
        found = self._fetch(sql.FIRST_DELIVERIES, {"operation_id": sorted(set(operation_ids))})
        return {
            row["operation_id"]: (row["first_topic"], row["first_partition"], row["first_offset"])
            for row in found
        }

    @translated
    def lock_nodes(self, keys: Sequence[tuple[str, str]]) -> None:
        if keys:
            nodes = sorted(set(keys))
            self._execute(sql.LOCK_REGISTRY_NODES, rows.key_columns(("space", "node_id"), nodes))

    @translated
    def listed_elsewhere(
        self,
        nodes: Sequence[tuple[DocumentKey, str]],
        edges: Sequence[tuple[DocumentKey, EdgeKey]],
    ) -> tuple[set[tuple[DocumentKey, str]], set[tuple[DocumentKey, EdgeKey]]]:
        found_nodes = (
            self._fetch(sql.CLAIMED_NODES, rows.claimed_node_columns(nodes)) if nodes else []
        )
        found_edges = (
            self._fetch(sql.CLAIMED_EDGES, rows.claimed_edge_columns(edges)) if edges else []
        )
        return (
            {nodes[row["ord"] - 1] for row in found_nodes},
            {edges[row["ord"] - 1] for row in found_edges},
        )

    @translated
    def graph_applied_plans(self, spaces: Sequence[str]) -> list[tuple[DocumentKey, bytes]]:
        if not spaces:
            return []
        found = self._fetch(sql.GRAPH_APPLIED_PLANS, {"space": sorted(set(spaces))})
        return [((row["space"], row["document_id"]), bytes(row["plan_bytes"])) for row in found]

    @translated
    def register_entities(self, registrations: Sequence[EntityRegistration]) -> None:
        if not registrations:
            return
        merged = merge_within_call(registrations)
        nodes = sorted({(r.space, r.node_id) for r in merged})
        self._execute(sql.LOCK_REGISTRY_NODES, rows.key_columns(("space", "node_id"), nodes))
        existing = [
            rows.registry_row(row)
            for row in self._fetch(
                sql.SELECT_REGISTRY,
                {
                    "space": sorted({r.space for r in merged}),
                    "entity_type": sorted({r.entity_type for r in merged}),
                    "normalized_name": sorted({r.normalized_name for r in merged}),
                    "node_id": sorted({r.node_id for r in merged}),
                },
            )
        ]
        check_against_existing(merged, existing)
        stored = {row.key: row for row in existing}
        to_write = [
            r
            for r in merged
            if (row := stored.get(registry_key(r))) is None
            or not set(r.aliases) <= set(row.aliases)
        ]
        if not to_write:
            return
        with self._savepoint():
            found = self._fetch(sql.UPSERT_REGISTRY, rows.registration_columns(to_write))
            written = {(row["space"], row["entity_type"], row["normalized_name"]) for row in found}
            lost = [r for r in to_write if registry_key(r) not in written]
            if lost:
                # Another transaction registered one of these new names first, to another node.
                bound = {
                    (row["space"], row["entity_type"], row["normalized_name"]): row["node_id"]
                    for row in self._fetch(
                        sql.SELECT_REGISTRY_NODES, rows.registration_columns(lost)
                    )
                }
                key = registry_key(lost[0])
                raise reassignment(
                    key, bound.get(key, "<unknown>"), lost[0].node_id, "registered concurrently"
                )

    # -- parked, outbox, failures, DLQ ------------------------------------------------------------

    @translated
    def parked_behind(self, keys: Sequence[tuple[str, str, int]]) -> list[StoredPlan]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return []
        found = self._fetch(
            sql.PARKED_BEHIND,
            {
                **rows.key_columns(("space", "document_id", "expected_revision"), unique),
                "parked": Stage.PARKED.value,
                "dead_lettered": Stage.DEAD_LETTERED.value,
                "pending": DlqStatus.PENDING_REVIEW.value,
            },
        )
        return [
            StoredPlan(
                rows.operation_from_row(row), bytes(row["plan_bytes"]), dict(row["work_headers"])
            )
            for row in found
        ]

    @translated
    def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        if messages:
            self._execute(sql.ENQUEUE, rows.outbox_columns(messages))

    @translated
    def record_failure(self, attempt: FailureAttempt) -> bool:
        return bool(self._fetch(sql.RECORD_FAILURE, rows.failure_params(attempt)))

    @translated
    def routed_sources(
        self, positions: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], str]:
        if not positions:
            return {}
        found = self._fetch(
            sql.ROUTED_SOURCES, rows.key_columns(("topic", "partition", "offset"), positions)
        )
        return {
            (row["source_topic"], row["source_partition"], row["source_offset"]): row["routed_to"]
            for row in found
        }

    @translated
    def failure_history(self, operation_id: str) -> list[FailureAttempt]:
        self._cur.execute(sql.FAILURE_HISTORY, (operation_id,))
        return [rows.failure_from_row(row) for row in self._cur.fetchall()]

    @translated
    def parked_on_document(self, space: str, document_id: str) -> list[tuple[Operation, bytes]]:
        found = self._fetch(
            sql.PARKED_ON_DOCUMENT,
            {"space": space, "document_id": document_id, "stage": Stage.PARKED.value},
        )
        return [(rows.operation_from_row(row), bytes(row["plan_bytes"])) for row in found]

    @translated
    def dead_lettered_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[DocumentKey, Operation]:
        return self._by_document(
            sql.DEAD_LETTERED_AT,
            keys,
            {"dead_lettered": Stage.DEAD_LETTERED.value, "pending": DlqStatus.PENDING_REVIEW.value},
        )

    @translated
    def purged_leaders_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[DocumentKey, Operation]:
        return self._by_document(sql.PURGED_LEADERS_AT, keys, rows.on_its_way_params())

    def _by_document(
        self, query: str, keys: Sequence[tuple[str, str, int]], params: Mapping[str, Any]
    ) -> dict[DocumentKey, Operation]:
        """The operation ``query`` finds per (space, document_id, expected_revision) key."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        found = self._fetch(
            query,
            {**rows.key_columns(("space", "document_id", "expected_revision"), unique), **params},
        )
        return {(row["space"], row["document_id"]): rows.operation_from_row(row) for row in found}

    @translated
    def waiting_behind(self, leader: Operation) -> list[Operation]:
        found = self._fetch(
            sql.WAITING_BEHIND,
            {
                "space": leader.space,
                "document_id": leader.document_id,
                "revision": leader.expected_revision,
                "parked": Stage.PARKED.value,
                "dead_lettered": Stage.DEAD_LETTERED.value,
                "pending": DlqStatus.PENDING_REVIEW.value,
            },
        )
        return [rows.operation_from_row(row) for row in found]

    @translated
    def dlq_entries(self, dlq_ids: Sequence[str]) -> dict[str, DlqEntry]:
        if not dlq_ids:
            return {}
        found = self._fetch(sql.DLQ_ENTRIES, {"dlq_id": sorted(set(dlq_ids))})
        return {row["dlq_id"]: rows.dlq_entry_from_row(row) for row in found}

    @translated
    def put_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        if entries:
            self._execute(sql.PUT_DLQ_ENTRIES, rows.dlq_entry_columns(entries))

    @translated
    def lock_dlq_index(self) -> None:
        self._execute(sql.LOCK_DLQ_INDEX, {})

    @translated
    def newest_outbox_values(self, topic: str, since: datetime) -> dict[bytes, bytes]:
        found = self._fetch(sql.NEWEST_OUTBOX_VALUES, {"topic": topic, "since": since})
        return {bytes(row["message_key"]): bytes(row["message_value"]) for row in found}

    @translated
    def replace_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        with self._savepoint():
            self._execute(sql.DELETE_DLQ_ENTRIES, {})
            self.put_dlq_entries(entries)

    # -- the planner -------------------------------------------------------------------------

    @translated
    def record_submissions(self, submissions: Sequence[Submission]) -> None:
        newest = {s.submission_id: s for s in submissions}  # one row per id and statement
        if newest:
            self._execute(sql.RECORD_SUBMISSIONS, rows.submission_columns(list(newest.values())))

    @translated
    def record_replans(self, replans: Sequence[Replan]) -> None:
        unique = {r.operation_id: r for r in replans}
        if unique:
            self._execute(sql.RECORD_REPLANS, rows.replan_columns(list(unique.values())))

    @translated
    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        unique = {c.key: c for c in claims}
        if unique:
            self._execute(sql.PUT_PLAN_CLAIMS, rows.plan_claim_columns(list(unique.values())))

    # -- plumbing ----------------------------------------------------------------------------

    def _execute(self, query: str, params: Mapping[str, Any]) -> None:
        self._cur.execute(query, params)

    def _fetch(self, query: str, params: Mapping[str, Any]) -> list[DictRow]:
        self._execute(query, params)
        return self._cur.fetchall()

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        """Undo the block's writes if it raises; the surrounding transaction goes on."""
        self._cur.execute("SAVEPOINT graph_ingest_call")
        try:
            yield
        except BaseException:
            with suppress(psycopg.Error):  # a dead connection: the whole transaction is lost
                self._cur.execute("ROLLBACK TO SAVEPOINT graph_ingest_call")
            raise
        self._cur.execute("RELEASE SAVEPOINT graph_ingest_call")


def snapshot_chains(operations: Sequence[Operation]) -> dict[str, list[Operation]]:
    """Group snapshots by operation, in call order; each operation's must be consecutive."""
    chains: dict[str, list[Operation]] = {}
    for op in operations:
        chain = chains.setdefault(op.operation_id, [])
        if chain and op.sequence != chain[-1].sequence + 1:
            raise StoreError(
                f"snapshots of operation {op.operation_id} in one call must have consecutive "
                f"sequences; got {chain[-1].sequence} then {op.sequence}",
                code=StatusCode.INVALID_ARGUMENT,
            )
        chain.append(op)
    return chains


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
