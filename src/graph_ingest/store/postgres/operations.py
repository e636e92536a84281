"""The operations port on PostgreSQL: create-if-absent, lock, compare-and-set on sequence.

Inserting and saving also write each snapshot's event to the outbox, in the same statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.errors import StoreError
from graph_ingest.store.operations import NewOperation
from graph_ingest.store.postgres.fragments import OPERATION_COLUMNS
from graph_ingest.store.postgres.operation_rows import (
    new_operation_columns,
    operation_from_row,
    saved_operation_columns,
)
from graph_ingest.store.postgres.params import DocumentKey
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated

# Create-if-absent (first writer wins) and, for the rows this statement created, their PREPARED
# event in the outbox: one statement.
INSERT_OPERATIONS = """
WITH incoming AS (
    SELECT *
    FROM ROWS FROM (
        json_to_recordset(%(operations)s::json) AS (
            operation_id text, space text, document_id text, expected_revision int,
            fingerprint text, stage text, sequence int, attempts int, last_error_code text,
            last_error_class text, last_error_message text, stage_times jsonb,
            next_retry_at timestamptz, dlq_id text, created_at timestamptz,
            updated_at timestamptz, details jsonb, work_headers jsonb, first_topic text,
            first_partition int, first_offset bigint
        )
    ) WITH ORDINALITY AS i(
        operation_id, space, document_id, expected_revision, fingerprint, stage, sequence,
        attempts, last_error_code, last_error_class, last_error_message, stage_times,
        next_retry_at, dlq_id, created_at, updated_at, details, work_headers, first_topic,
        first_partition, first_offset, ord
    )
    JOIN unnest(%(plan_bytes)b::bytea[], %(message_value)b::bytea[])
        WITH ORDINALITY AS b(plan_bytes, message_value, ord) USING (ord)
), inserted AS (
    INSERT INTO operations (
        operation_id, space, document_id, expected_revision, fingerprint, plan_bytes, stage,
        sequence, attempts, last_error_code, last_error_class, last_error_message, stage_times,
        next_retry_at, dlq_id, created_at, updated_at, details, work_headers, first_topic,
        first_partition, first_offset
    )
    SELECT operation_id, space, document_id, expected_revision, fingerprint, plan_bytes, stage,
           sequence, attempts, last_error_code, last_error_class, last_error_message,
           stage_times, next_retry_at, dlq_id, created_at, updated_at, details, work_headers,
           first_topic, first_partition, first_offset
    FROM incoming
    ORDER BY operation_id  -- a stable order: concurrent inserters wait instead of deadlocking
    ON CONFLICT (operation_id) DO NOTHING
    RETURNING operation_id
)
INSERT INTO outbox (topic, message_key, message_value, headers, operation_id, sequence)
SELECT %(topic)b, convert_to(i.operation_id, 'UTF8'), i.message_value,
       jsonb_build_object('operation_id', i.operation_id, 'sequence', i.sequence::text,
                          'stage', i.stage),
       i.operation_id, i.sequence
FROM incoming AS i JOIN inserted USING (operation_id)
ORDER BY i.ord
"""


LOCK_OPERATIONS = (
    "SELECT"
    + OPERATION_COLUMNS
    + """
FROM operations
WHERE operation_id = ANY(%(operation_id)b::text[])
ORDER BY operation_id
FOR UPDATE
"""
)


# Optimistic compare-and-set on sequence, and the events of the rows it moved, in one statement.
# Returns the ids it updated; the caller compares them with what it asked for.
SAVE_OPERATIONS = """
WITH snapshot AS (
    SELECT *
    FROM json_to_recordset(%(snapshots)s::json) AS s(
        operation_id text, expected_sequence int, stage text, sequence int, attempts int,
        last_error_code text, last_error_class text, last_error_message text, stage_times jsonb,
        next_retry_at timestamptz, dlq_id text, updated_at timestamptz, details jsonb
    )
), updated AS (
    UPDATE operations AS o
    SET stage = s.stage,
        sequence = s.sequence,
        attempts = s.attempts,
        last_error_code = s.last_error_code,
        last_error_class = s.last_error_class,
        last_error_message = s.last_error_message,
        stage_times = s.stage_times,
        next_retry_at = s.next_retry_at,
        dlq_id = s.dlq_id,
        updated_at = s.updated_at,
        details = s.details
    FROM snapshot AS s
    WHERE o.operation_id = s.operation_id AND o.sequence = s.expected_sequence
    RETURNING o.operation_id
), event AS (
    SELECT e.operation_id, e.sequence, v.message_value,
           jsonb_build_object('operation_id', e.operation_id, 'sequence', e.sequence::text,
                              'stage', e.stage) AS headers,
           ord
    FROM ROWS FROM (
        json_to_recordset(%(events)s::json) AS (operation_id text, sequence int, stage text)
    ) WITH ORDINALITY AS e(operation_id, sequence, stage, ord)
    JOIN unnest(%(event_value)b::bytea[]) WITH ORDINALITY AS v(message_value, ord) USING (ord)
), published AS (
    INSERT INTO outbox (topic, message_key, message_value, headers, operation_id, sequence)
    SELECT %(topic)b, convert_to(e.operation_id, 'UTF8'), e.message_value, e.headers,
           e.operation_id, e.sequence
    FROM event AS e JOIN updated USING (operation_id)
    ORDER BY e.ord
)
SELECT operation_id FROM updated
"""


FIRST_DELIVERIES = """
SELECT operation_id, first_topic, first_partition, first_offset FROM operations
WHERE operation_id = ANY(%(operation_id)b::text[]) AND first_topic IS NOT NULL
"""


# Plans written to the graph whose state is not committed yet (the applier's delete guard).
GRAPH_APPLIED_PLANS = """
SELECT space, document_id, plan_bytes FROM operations
WHERE stage = 'GRAPH_APPLIED' AND space = ANY(%(space)b::text[])
"""


GET_OPERATION = "SELECT" + OPERATION_COLUMNS + "\nFROM operations WHERE operation_id = %s"


GET_PLAN_BYTES = "SELECT plan_bytes FROM operations WHERE operation_id = %s"


GET_WORK_HEADERS = "SELECT work_headers FROM operations WHERE operation_id = %s"


PLAN_BYTES_OF = """
SELECT operation_id, plan_bytes FROM operations WHERE operation_id = ANY(%(operation_id)b::text[])
"""


class PostgresOperationWriter(TransactionSession):
    """``OperationWriter`` in a unit of work."""

    @translated
    def insert_operations(self, new: Sequence[NewOperation]) -> None:
        first = {n.operation.operation_id: n for n in reversed(new)}  # first occurrence wins
        unique = [n for n in new if first[n.operation.operation_id] is n]
        if not unique:
            return
        values = [(n, self._encode(n.operation)) for n in unique]
        self._execute(INSERT_OPERATIONS, {**new_operation_columns(values), "topic": self._topic})

    @translated
    def lock_operations(self, operation_ids: Sequence[str]) -> dict[str, Operation]:
        if not operation_ids:
            return {}
        found = self._fetch(LOCK_OPERATIONS, {"operation_id": sorted(set(operation_ids))})
        return {row["operation_id"]: operation_from_row(row) for row in found}

    @translated
    def save_operations(self, operations: Sequence[Operation]) -> None:
        if not operations:
            return
        chains = snapshot_chains(operations)
        latest = [(chain[-1], chain[0].sequence - 1) for chain in chains.values()]
        events = [(op, self._encode(op)) for op in operations]
        params = {**saved_operation_columns(latest, events), "topic": self._topic}
        with self._savepoint():
            updated = {row["operation_id"] for row in self._fetch(SAVE_OPERATIONS, params)}
            lost = {op_id: chain for op_id, chain in chains.items() if op_id not in updated}
            if lost:
                raise self._lost_race(lost)

    def _lost_race(self, lost: Mapping[str, list[Operation]]) -> StoreError:
        stored = {
            row["operation_id"]: row["sequence"]
            for row in self._fetch(LOCK_OPERATIONS, {"operation_id": sorted(lost)})
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

    @translated
    def first_deliveries(self, operation_ids: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        if not operation_ids:
            return {}
        found = self._fetch(FIRST_DELIVERIES, {"operation_id": sorted(set(operation_ids))})
        return {
            row["operation_id"]: (row["first_topic"], row["first_partition"], row["first_offset"])
            for row in found
        }

    @translated
    def graph_applied_plans(self, spaces: Sequence[str]) -> list[tuple[DocumentKey, bytes]]:
        if not spaces:
            return []
        found = self._fetch(GRAPH_APPLIED_PLANS, {"space": sorted(set(spaces))})
        return [((row["space"], row["document_id"]), bytes(row["plan_bytes"])) for row in found]


class PostgresOperationReader(PooledReads):
    """``OperationReader``: each call its own short read."""

    @translated
    def get_operation(self, operation_id: str) -> Operation | None:
        row = self._fetch_one(GET_OPERATION, (operation_id,))
        return None if row is None else operation_from_row(row)

    @translated
    def get_plan_bytes(self, operation_id: str) -> bytes | None:
        row = self._fetch_one(GET_PLAN_BYTES, (operation_id,))
        return None if row is None else bytes(row["plan_bytes"])

    @translated
    def get_work_headers(self, operation_id: str) -> dict[str, str]:
        row = self._fetch_one(GET_WORK_HEADERS, (operation_id,))
        return {} if row is None else dict(row["work_headers"])

    @translated
    def plan_bytes_of(self, operation_ids: Sequence[str]) -> dict[str, bytes]:
        if not operation_ids:
            return {}
        found = self._fetch_all(PLAN_BYTES_OF, {"operation_id": sorted(set(operation_ids))})
        return {row["operation_id"]: bytes(row["plan_bytes"]) for row in found}


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
