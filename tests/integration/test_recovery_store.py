"""Recovery leases of PostgresOperationStore against a real PostgreSQL (own schema per test)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.operations import NewOperation
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.store.recovery import RecoveryClaim
from tests.integration.test_postgres_store import TOPIC, encode, pg, query, store

__all__ = ["pg", "store"]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECOVERABLE_STAGES = {
    Stage.PREPARED,
    Stage.GRAPH_APPLIED,
    Stage.STATE_COMMITTED,
    Stage.FAILED,
    Stage.PARKED,
}
RESUMABLE_STAGES = RECOVERABLE_STAGES | {Stage.DEAD_LETTERED}


def stored_op(n: int, stage: Stage, *, minutes_ago: float, **update: object) -> Operation:
    at = datetime.now(UTC) - timedelta(minutes=minutes_ago)  # at call time: suites run long
    return Operation.prepared(
        operation_id=f"op-{n:03d}",
        space="kb",
        document_id=f"doc-{n}",
        expected_revision=0,
        fingerprint=f"v1:{n}",
        at=at,
    ).model_copy(update={"stage": stage, **update})


def doc_state(document_id: str, revision: int) -> DocumentState:
    return DocumentState(
        space="kb",
        document_id=document_id,
        revision=revision,
        operation_id=f"op-{document_id}-{revision}",
        content_hash=f"sha256:{revision}",
        document_version=str(revision),
    )


def insert(store: PostgresOperationStore, *ops: Operation) -> None:
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(op, f"plan-{op.operation_id}".encode()) for op in ops])


def claim(
    store: PostgresOperationStore, *, limit: int = 100, older_than_s: float = 60, by: str = "a"
) -> list[RecoveryClaim]:
    return store.claim_for_recovery(
        stages=RECOVERABLE_STAGES, older_than_s=older_than_s, limit=limit, claimer=by, lease_s=300
    )


def test_claims_stranded_operations_oldest_first_within_the_limit(
    store: PostgresOperationStore,
) -> None:
    insert(
        store,
        stored_op(1, Stage.FAILED, minutes_ago=10),
        stored_op(2, Stage.GRAPH_APPLIED, minutes_ago=30),
        stored_op(3, Stage.STATE_COMMITTED, minutes_ago=20),
        stored_op(4, Stage.PREPARED, minutes_ago=40),
    )

    first = claim(store, limit=3)

    assert [c.operation.operation_id for c in first] == ["op-004", "op-002", "op-003"]
    assert [c.plan_bytes for c in first] == [b"plan-op-004", b"plan-op-002", b"plan-op-003"]
    assert {c.claimed_by for c in first} == {"a"} and {c.claims for c in first} == {1}
    assert all(c.lease_until > datetime.now(UTC) + timedelta(minutes=4) for c in first)
    assert [c.operation.operation_id for c in claim(store, by="b")] == ["op-001"]
    assert claim(store, by="c") == []  # every lease is held


def test_leaves_alone_what_is_young_finished_dead_lettered_or_due_for_a_retry(
    store: PostgresOperationStore,
) -> None:
    now = datetime.now(UTC)
    insert(
        store,
        stored_op(1, Stage.FAILED, minutes_ago=0.1),
        stored_op(2, Stage.COMPLETED, minutes_ago=30),
        stored_op(3, Stage.CONFLICT, minutes_ago=30),
        stored_op(4, Stage.DEAD_LETTERED, minutes_ago=30),
        stored_op(5, Stage.FAILED, minutes_ago=30, next_retry_at=now + timedelta(minutes=5)),
        stored_op(6, Stage.FAILED, minutes_ago=30, next_retry_at=now - timedelta(minutes=5)),
    )

    assert [c.operation.operation_id for c in claim(store)] == ["op-006"]


def test_a_parked_operation_is_stranded_only_once_its_document_caught_up(
    store: PostgresOperationStore,
) -> None:
    waiting = stored_op(1, Stage.PARKED, minutes_ago=30).model_copy(update={"expected_revision": 1})
    lost = stored_op(2, Stage.PARKED, minutes_ago=20).model_copy(update={"expected_revision": 1})
    overtaken = stored_op(3, Stage.PARKED, minutes_ago=10).model_copy(
        update={"expected_revision": 1}
    )
    insert(store, waiting, lost, overtaken)
    with store.unit_of_work() as uow:
        uow.commit_document_states([doc_state("doc-2", 1), doc_state("doc-3", 1)])
        uow.commit_document_states([doc_state("doc-3", 2)])

    # op-001 waits for doc-1 to reach revision 1: its predecessor's commit releases it
    assert [c.operation.operation_id for c in claim(store)] == ["op-002", "op-003"]


def test_an_expired_or_released_lease_can_be_claimed_again(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    insert(
        store,
        stored_op(1, Stage.FAILED, minutes_ago=10),
        stored_op(2, Stage.GRAPH_APPLIED, minutes_ago=9),
    )
    claim(store)
    assert store.release_recovery_claim("op-001", "someone-else") is False
    assert store.release_recovery_claim("op-001", "a") is True
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:  # op-002's lease runs out
        conn.execute(
            "UPDATE operations SET recovery_lease_until = now() WHERE operation_id = %s",
            ("op-002",),
        )

    again = claim(store, by="b")

    assert [(c.operation.operation_id, c.claimed_by, c.claims) for c in again] == [
        ("op-001", "b", 2),
        ("op-002", "b", 2),
    ]


def test_an_operation_an_applier_holds_locked_is_skipped_not_waited_for(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    insert(
        store, stored_op(1, Stage.FAILED, minutes_ago=10), stored_op(2, Stage.FAILED, minutes_ago=9)
    )
    with store.unit_of_work() as uow:
        uow.lock_operations(["op-001"])  # an apply step in progress
        other = PostgresOperationStore(pg, event_encoder=encode, operations_topic=TOPIC)
        other.start()
        try:
            assert [c.operation.operation_id for c in claim(other)] == ["op-002"]
        finally:
            other.close()


def test_resume_takes_over_a_held_lease_but_not_a_finished_operation(
    store: PostgresOperationStore,
) -> None:
    insert(
        store,
        stored_op(1, Stage.FAILED, minutes_ago=10),
        stored_op(2, Stage.COMPLETED, minutes_ago=9),
    )
    claim(store)
    taken = store.claim_operation("op-001", stages=RESUMABLE_STAGES, claimer="resume", lease_s=60)
    assert taken is not None and taken.claimed_by == "resume" and taken.claims == 2
    assert store.claim_operation("op-002", stages=RESUMABLE_STAGES, claimer="r", lease_s=60) is None
    assert store.claim_operation("op-404", stages=RESUMABLE_STAGES, claimer="r", lease_s=60) is None


def test_concurrent_claimers_never_take_the_same_operation(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    count, claimers = 60, 4
    insert(store, *(stored_op(n, Stage.FAILED, minutes_ago=10 + n / 100) for n in range(count)))
    stores = [
        PostgresOperationStore(pg, event_encoder=encode, operations_topic=TOPIC)
        for _ in range(claimers)
    ]
    for s in stores:
        s.start()
    barrier = threading.Barrier(claimers)

    def take_all(index: int) -> list[str]:
        barrier.wait()
        taken: list[str] = []
        while batch := claim(stores[index], limit=3, by=f"c{index}"):
            taken += [c.operation.operation_id for c in batch]
        return taken

    try:
        with ThreadPoolExecutor(claimers) as pool:
            results = [
                f.result(timeout=60) for f in [pool.submit(take_all, i) for i in range(claimers)]
            ]
    finally:
        for s in stores:
            s.close()

    every = Counter(op_id for taken in results for op_id in taken)
    assert len(every) == count and set(every.values()) == {1}
    rows = query(pg, "SELECT recovery_claimed_by, count(*) FROM operations GROUP BY 1")
    assert {by: n for by, n in rows} == {f"c{i}": len(r) for i, r in enumerate(results) if r}
