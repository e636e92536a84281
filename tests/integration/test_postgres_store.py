"""PostgresOperationStore against a real PostgreSQL: each test gets its own schema."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.error_detail import (
    ErrorContext,
    ErrorDetail,
    RetryAdvice,
    RetryStrategy,
)
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import (
    DocumentState,
    EntityRegistration,
    Evidence,
    FactKind,
    FactSource,
)
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings import Settings
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.store.errors import RegistryConflict, StoreError
from graph_ingest.store.failures import FailureAttempt
from graph_ingest.store.migrate import migrate
from graph_ingest.store.operations import NewOperation
from graph_ingest.store.parking import StoredPlan
from graph_ingest.store.postgres.registry import (
    SELECT_REGISTRY,
    PostgresRegistryWriter,
    lookup_parameters,
    registry_nodes,
)
from graph_ingest.store.postgres.store import PostgresOperationStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "test.operations"
SPACE = "kb"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def encode(op: Operation) -> bytes:
    return op.model_dump_json().encode()


# -- fixtures and helpers ------------------------------------------------------------------------


def _drop_schema(settings: PostgresSettings) -> None:
    with psycopg.connect(settings.conninfo(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(settings.schema_name))
        )


@pytest.fixture
def pg(stack_settings: Settings) -> Iterator[PostgresSettings]:
    settings = stack_settings.postgres.model_copy(
        update={"schema_name": f"t_{uuid.uuid4().hex}", "pool_max_size": 4}
    )
    migrate(settings)
    yield settings
    _drop_schema(settings)


@pytest.fixture
def store(pg: PostgresSettings) -> Iterator[PostgresOperationStore]:
    s = PostgresOperationStore(pg, event_encoder=encode, operations_topic=TOPIC)
    s.start()
    yield s
    s.close()


def query(pg: PostgresSettings, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg.conninfo()) as conn:
        return conn.execute(text, params).fetchall()


def outbox(pg: PostgresSettings) -> list[tuple[Any, ...]]:
    return query(
        pg,
        "SELECT topic, message_key, message_value, headers, operation_id, sequence FROM outbox"
        " ORDER BY id",
    )


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def lock_waiters(pg: PostgresSettings) -> int:
    rows = query(
        pg,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()",
    )
    return int(rows[0][0])


def new_op(n: int | str, *, doc: str | None = None, expected: int = 0) -> Operation:
    return Operation.prepared(
        operation_id=f"op-{n}",
        space=SPACE,
        document_id=doc or f"doc-{n}",
        expected_revision=expected,
        fingerprint=f"v1:{n}",
        at=T0,
    )


def state(
    doc: str,
    revision: int,
    op_id: str,
    facts: tuple[FactSource, ...] = (),
    *,
    base: str | None = None,
) -> DocumentState:
    """``base``: the operation the state was planned on (by default ``op-<revision - 1>``)."""
    return DocumentState(
        space=SPACE,
        document_id=doc,
        revision=revision,
        operation_id=op_id,
        base_operation_id=base or (f"op-{revision - 1}" if revision > 1 else None),
        content_hash=f"sha256:{doc}:{revision}",
        document_version=f"v{revision}",
        node_ids=(f"{doc}-n2", f"{doc}-n1"),
        edge_keys=(EdgeKey(src=f"{doc}-n2", type="KNOWS", dst=f"{doc}-n1", rank=revision),),
        superseded_edge_keys=(EdgeKey(src="a", type="OLD", dst="b"),) if revision > 1 else (),
        fact_sources=facts,
        # From revision 2 on, what the planner records (revision 1 stands for a hand-written plan).
        schema_version="2026-12-01" if revision > 1 else None,
        extraction_fingerprint=f"v1:{doc}:{revision}" if revision > 1 else None,
        source_updated_at=T0 - timedelta(days=1, minutes=-revision) if revision > 1 else None,
        committed_at=T0 + timedelta(minutes=revision),
    )


def fact(fact_id: str, quote: str = "quote") -> FactSource:
    return FactSource(
        fact_id=fact_id, kind=FactKind.NODE, evidence=(Evidence(quote=quote, start=0, end=5),)
    )


def reg(name: str, node: str, *aliases: str, entity_type: str = "Person") -> EntityRegistration:
    return EntityRegistration(
        space=SPACE,
        entity_type=entity_type,
        name=name,
        normalized_name=" ".join(name.casefold().split()),
        node_id=node,
        aliases=aliases,
    )


def registry(pg: PostgresSettings) -> dict[tuple[str, str], tuple[str, str, list[str]]]:
    rows = query(
        pg, "SELECT entity_type, normalized_name, name, node_id, aliases FROM entity_registry"
    )
    return {(t, n): (name, node, aliases) for t, n, name, node, aliases in rows}


# -- operations ----------------------------------------------------------------------------------


def test_insert_operations_first_writer_wins(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    first = new_op(1)
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(first, b"plan-A"), NewOperation(first, b"plan-dup")])
    with store.unit_of_work() as uow:
        uow.insert_operations(
            [NewOperation(first.model_copy(update={"fingerprint": "v1:other"}), b"plan-B")]
        )

    assert store.get_plan_bytes("op-1") == b"plan-A"
    assert store.get_operation("op-1") == first
    assert outbox(pg) == [
        (
            TOPIC,
            b"op-1",
            encode(first),
            {"operation_id": "op-1", "sequence": "1", "stage": "PREPARED"},
            "op-1",
            1,
        )
    ]
    assert store.get_operation("missing") is None
    assert store.get_plan_bytes("missing") is None


def test_plan_and_identity_are_frozen_by_the_schema(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(new_op(1), b"plan")])
    with pytest.raises(psycopg.IntegrityError, match="frozen plan"):
        query(pg, "UPDATE operations SET plan_bytes = 'x'::bytea")


def test_save_operations_bumps_and_writes_events_in_order(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    a, b = new_op("a"), new_op("b")
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(a, b"pa"), NewOperation(b, b"pb")])
    a2 = a.transition(Stage.GRAPH_APPLIED, T0 + timedelta(seconds=1))
    error = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="Boom", message="neo4j down")
    b2 = b.transition(Stage.FAILED, T0 + timedelta(seconds=2), error).model_copy(
        update={"next_retry_at": T0 + timedelta(seconds=30), "dlq_id": "dlq-7"}
    )
    a3 = a2.transition(Stage.STATE_COMMITTED, T0 + timedelta(seconds=3))
    a4 = a3.transition(Stage.COMPLETED, T0 + timedelta(seconds=3))
    with store.unit_of_work() as uow:
        uow.save_operations([a2, b2, a3, a4])
        assert uow.lock_operations(["op-a", "op-b", "op-x"]) == {"op-a": a4, "op-b": b2}

    assert store.get_operation("op-a") == a4
    assert store.get_operation("op-b") == b2
    events = outbox(pg)
    assert [(e[4], e[5], e[3]["stage"]) for e in events] == [
        ("op-a", 1, "PREPARED"),
        ("op-b", 1, "PREPARED"),
        ("op-a", 2, "GRAPH_APPLIED"),
        ("op-b", 2, "FAILED"),
        ("op-a", 3, "STATE_COMMITTED"),
        ("op-a", 4, "COMPLETED"),
    ]
    assert events[3][2] == encode(b2)
    assert all(e[3]["sequence"] == str(e[5]) for e in events)


def test_stale_snapshot_raises_aborted_and_writes_nothing_of_the_call(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    a, b = new_op("a"), new_op("b")
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(a, b"pa"), NewOperation(b, b"pb")])
    b2 = b.transition(Stage.GRAPH_APPLIED, T0)
    with store.unit_of_work() as uow:
        uow.save_operations([b2])

    a2 = a.transition(Stage.GRAPH_APPLIED, T0)
    zombie = b.transition(Stage.FAILED, T0)  # sequence 2 again: stored is already 2
    with store.unit_of_work() as uow:
        with pytest.raises(StoreError) as raised:
            uow.save_operations([a2, zombie])
        assert raised.value.code is StatusCode.ABORTED
        assert "op-b" in str(raised.value) and "sequence 2" in str(raised.value)
        with pytest.raises(StoreError) as missing:
            uow.save_operations([new_op("ghost").transition(Stage.GRAPH_APPLIED, T0)])
        assert missing.value.code is StatusCode.NOT_FOUND
        # The transaction goes on, without anything of the failed calls.
        assert uow.lock_operations(["op-a"]) == {"op-a": a}

    assert store.get_operation("op-a") == a
    assert store.get_operation("op-b") == b2
    assert [(e[4], e[5]) for e in outbox(pg)] == [("op-a", 1), ("op-b", 1), ("op-b", 2)]


def test_rollback_on_exception_leaves_nothing(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(new_op(1), b"plan")])
        uow.enqueue([OutboxMessage(topic="t", key=None, value=b"v", headers={})])
        uow.commit_document_states([state("doc-1", 1, "op-1", (fact("f"),))])
        uow.register_entities([reg("Zhang San", "n1")])
        raise RuntimeError("applier crashed mid-step")

    for table in ("operations", "outbox", "document_states", "document_history", "fact_sources"):
        assert query(pg, f"SELECT count(*) FROM {table}") == [(0,)], table
    assert registry(pg) == {}


# -- documents -----------------------------------------------------------------------------------


def test_a_plan_and_its_document_state_are_stored_with_lz4(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    plan = b"".join(f"node-{i:05d} Person;".encode() for i in range(2000))
    nodes = tuple(f"d1-node-{i:05d}" for i in range(2000))
    large = state("d1", 1, "op-1").model_copy(update={"node_ids": nodes})
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(new_op(1, doc="d1"), plan)])
        assert uow.commit_document_states([large]) == set()  # with its history row

    # lz4 (migration 0016), not PostgreSQL's default pglz: half the CPU for these values
    assert query(
        pg,
        "SELECT pg_column_compression(o.plan_bytes), pg_column_compression(s.node_ids),"
        " pg_column_compression(h.state)"
        " FROM operations AS o, document_states AS s, document_history AS h",
    ) == [("lz4", "lz4", "lz4")]
    assert store.get_plan_bytes("op-1") == plan
    stored = store.get_document_state(SPACE, "d1")
    assert stored is not None and stored.node_ids == nodes


def test_commit_document_states_compare_and_set(store: PostgresOperationStore) -> None:
    with store.unit_of_work() as uow:
        assert uow.commit_document_states([state("d1", 1, "op-1"), state("d2", 2, "op-x")]) == {
            (SPACE, "d2")  # absent counts as revision 0
        }
    with store.unit_of_work() as uow:
        failed = uow.commit_document_states([state("d1", 1, "op-again"), state("d3", 0, "op-zero")])
        assert failed == {(SPACE, "d1"), (SPACE, "d3")}  # revision 1 exists; 0 never commits
        assert uow.commit_document_states([state("d1", 3, "op-skip")]) == {(SPACE, "d1")}
        # revision 1 is there, but committed by another lineage than the one planned on
        assert uow.commit_document_states([state("d1", 2, "op-b", base="op-lost")]) == {
            (SPACE, "d1")
        }
        assert uow.commit_document_states([state("d1", 2, "op-2")]) == set()
        revisions = uow.document_revisions([(SPACE, "d1"), (SPACE, "d2"), (SPACE, "d1")])
    assert {k: (v.revision, v.operation_id) for k, v in revisions.items()} == {
        (SPACE, "d1"): (2, "op-2")
    }
    with store.unit_of_work() as uow, pytest.raises(StoreError) as raised:
        uow.commit_document_states([state("d9", 1, "a"), state("d9", 1, "b")])
    assert raised.value.code is StatusCode.INVALID_ARGUMENT
    assert store.get_document_state(SPACE, "d9") is None


def test_two_concurrent_first_commits_one_wins(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    holding = threading.Event()
    release = threading.Event()

    def first() -> set[tuple[str, str]]:
        with store.unit_of_work() as uow:
            failed = uow.commit_document_states([state("doc", 1, "op-first")])
            holding.set()
            assert release.wait(30)
            return failed

    def second() -> set[tuple[str, str]]:
        assert holding.wait(30)
        with store.unit_of_work() as uow:
            return uow.commit_document_states([state("doc", 1, "op-second")])

    with ThreadPoolExecutor(2) as executor:
        a, b = executor.submit(first), executor.submit(second)
        wait_until(lambda: lock_waiters(pg) >= 1)  # the second insert waits on the first's row
        release.set()
        assert a.result(timeout=30) == set()
        assert b.result(timeout=30) == {(SPACE, "doc")}
    current = store.get_document_state(SPACE, "doc")
    assert current is not None and current.operation_id == "op-first"
    assert [s.operation_id for s in store.document_history(SPACE, "doc")] == ["op-first"]


def test_history_and_fact_sources_are_replaced(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    s1 = state("doc", 1, "op-1", (fact("z-node", "Zhang"), fact("a-node")))
    s2 = state("doc", 2, "op-2", (fact("c-node", "张三负责支付系统"),))
    with store.unit_of_work() as uow:
        uow.commit_document_states([s1, state("other", 1, "op-o", (fact("z-node"),))])
    assert store.get_document_state(SPACE, "doc") == s1  # fact order kept, not sorted
    with store.unit_of_work() as uow:
        assert uow.commit_document_states([s2]) == set()

    assert store.get_document_state(SPACE, "doc") == s2
    assert store.document_history(SPACE, "doc") == [s1, s2]
    assert query(pg, "SELECT document_id, fact_id, operation_id FROM fact_sources ORDER BY 1") == [
        ("doc", "c-node", "op-2"),
        ("other", "z-node", "op-o"),
    ]
    assert store.get_document_state(SPACE, "nope") is None
    assert store.document_history(SPACE, "nope") == []


def test_commit_stamps_missing_commit_time_and_ensure_history_repairs(
    store: PostgresOperationStore,
) -> None:
    unstamped = state("doc", 1, "op-1").model_copy(update={"committed_at": None})
    with store.unit_of_work() as uow:
        uow.commit_document_states([unstamped])
    current = store.get_document_state(SPACE, "doc")
    assert current is not None and current.committed_at is not None
    assert current.model_copy(update={"committed_at": None}) == unstamped

    s2 = state("doc", 2, "op-2")
    with store.unit_of_work() as uow:
        uow.ensure_history([s2, s2.model_copy(update={"operation_id": "ignored"})])
        uow.ensure_history([current])  # already there: untouched
    assert store.document_history(SPACE, "doc") == [current, s2]


# -- registry ------------------------------------------------------------------------------------


def test_registry_merges_aliases_and_keeps_the_first_name(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.register_entities([reg("Zhang San", "n1", "ZS"), reg("zhang  san", "n1", "Z. San")])
        uow.register_entities([reg("Zhang Wei", "n1")])  # a node may carry several names
    with store.unit_of_work() as uow:
        uow.register_entities([reg("ZHANG SAN", "n1", "ZS", "Boss Zhang")])
        uow.register_entities([reg("Zhang San", "n1", "ZS")])  # nothing new: no write
    assert registry(pg) == {
        ("Person", "zhang san"): ("Zhang San", "n1", ["Boss Zhang", "Z. San", "ZS"]),
        ("Person", "zhang wei"): ("Zhang Wei", "n1", []),
    }


def test_registry_reassignment_rejects_the_whole_call(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.register_entities([reg("Zhang San", "n1")])
    with store.unit_of_work() as uow:
        with pytest.raises(RegistryConflict) as raised:
            uow.register_entities([reg("Li Si", "n2"), reg("Zhang San", "n3", "new alias")])
        uow.register_entities([reg("Wang Wu", "n4")])  # the transaction itself goes on
    message = str(raised.value)
    assert all(part in message for part in (SPACE, "Person", "zhang san", "n1", "n3"))
    assert raised.value.code is StatusCode.FAILED_PRECONDITION
    assert registry(pg) == {
        ("Person", "zhang san"): ("Zhang San", "n1", []),
        ("Person", "wang wu"): ("Wang Wu", "n4", []),
    }


def test_registry_type_of_a_node_may_not_change(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.register_entities([reg("Acme", "n1", entity_type="Company")])
    with store.unit_of_work() as uow, pytest.raises(RegistryConflict, match="type may not change"):
        uow.register_entities([reg("Other", "n9"), reg("Acme Person", "n1")])
    assert set(registry(pg)) == {("Company", "acme")}


def test_registry_contradictions_inside_one_call(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        with pytest.raises(RegistryConflict, match="same call"):
            uow.register_entities([reg("Zhang San", "n1"), reg("zhang san", "n2")])
        with pytest.raises(RegistryConflict, match="type may not change"):
            uow.register_entities([reg("A", "n1"), reg("B", "n1", entity_type="Company")])
    assert registry(pg) == {}


def test_registry_concurrent_new_name_for_two_nodes(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    holding = threading.Event()
    release = threading.Event()

    def first() -> None:
        with store.unit_of_work() as uow:
            uow.register_entities([reg("Wang Wu", "n5")])
            holding.set()
            assert release.wait(30)

    def second() -> str:
        assert holding.wait(30)
        with store.unit_of_work() as uow:
            try:
                uow.register_entities([reg("Bystander", "n7"), reg("Wang Wu", "n6")])
            except RegistryConflict as exc:
                return str(exc)
        return "no conflict"

    with ThreadPoolExecutor(2) as executor:
        a, b = executor.submit(first), executor.submit(second)
        wait_until(lambda: lock_waiters(pg) >= 1)
        release.set()
        a.result(timeout=30)
        message = b.result(timeout=30)
    assert "wang wu" in message and "n5" in message and "n6" in message
    assert registry(pg) == {("Person", "wang wu"): ("Wang Wu", "n5", [])}


# -- parked, outbox, failures, DLQ --------------------------------------------------------------------


def test_parked_behind_returns_parked_operations_with_their_plans(
    store: PostgresOperationStore,
) -> None:
    p1 = new_op("p1", doc="d", expected=1)
    p2 = new_op("p2", doc="d", expected=1)
    p3 = new_op("p3", doc="d", expected=2)
    with store.unit_of_work() as uow:
        uow.insert_operations(
            [
                NewOperation(op, op.operation_id.encode(), {"submission_id": op.operation_id})
                for op in (p1, p2, p3)
            ]
        )
        parked1 = p1.transition(Stage.PARKED, T0)
        uow.save_operations([parked1, p3.transition(Stage.PARKED, T0)])
    with store.unit_of_work() as uow:
        assert uow.parked_behind([(SPACE, "d", 1), (SPACE, "d", 1)]) == [
            StoredPlan(parked1, b"op-p1", {"submission_id": "op-p1"})
        ]
        assert uow.parked_behind([(SPACE, "d", 5), (SPACE, "x", 1)]) == []
        assert uow.parked_behind([]) == []


def test_enqueue_keeps_order_and_columns(
    store: PostgresOperationStore, pg: PostgresSettings
) -> None:
    with store.unit_of_work() as uow:
        uow.enqueue(
            [
                OutboxMessage(topic="plans", key=b"kb/d", value=b"p1", headers={"released": "x"}),
                OutboxMessage(topic="plans", key=None, value=b"p2", headers={}, operation_id="o"),
            ]
        )
    assert outbox(pg) == [
        ("plans", b"kb/d", b"p1", {"released": "x"}, None, None),
        ("plans", None, b"p2", {}, "o", None),
    ]
    assert query(pg, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == [(2,)]


def failure(source: tuple[str, int, int] | None, attempt: int, op: str | None) -> FailureAttempt:
    detail = ErrorDetail.create(
        trace_id="ab" * 16,
        code=StatusCode.DEADLINE_EXCEEDED,
        error_class="GraphError",
        message=f"attempt {attempt}: \x00 quoted",
        context=ErrorContext(worker_id="w-1", code_version="0.1.0"),
        retry=RetryAdvice(retryable=True, attempts_left=2, strategy=RetryStrategy.NEXT_TIER),
    )
    return FailureAttempt(
        source=source,
        operation_id=op,
        attempt=attempt,
        tier=None,
        routed_to="TIER",
        at=T0,
        detail=detail,
    )


def test_a_failure_is_recorded_once_per_source_message_and_read_back_in_attempt_order(
    store: PostgresOperationStore,
) -> None:
    second, first = (
        failure(("plans.retry.1s", 0, 7), 2, "op-1"),
        failure(("plans", 0, 3), 1, "op-1"),
    )
    follower = failure(None, 3, "op-1")
    with store.unit_of_work() as uow:
        assert uow.record_failure(second)
        assert uow.record_failure(first)
        assert uow.record_failure(follower)
        assert uow.record_failure(failure(None, 4, "op-1"))  # no source: never a duplicate
    with store.unit_of_work() as uow:
        # a redelivered message (its offset was not committed) is not recorded again
        assert not uow.record_failure(failure(("plans", 0, 3), 1, "op-1"))
        history = uow.failure_history("op-1")
        assert uow.failure_history("op-other") == []
    assert [f.attempt for f in history] == [1, 2, 3, 4]
    assert history[:3] == [first, second, follower]


def dlq_entry(dlq_id: str, status: DlqStatus, message: str) -> DlqEntry:
    return DlqEntry(
        dlq_id=dlq_id,
        status=status,
        operation_id="op-1",
        fingerprint=None,
        space=SPACE,
        document_id="d",
        code=StatusCode.INVALID_ARGUMENT,
        error_class="PlanDecodeError",
        message=message,
        parked_behind=None,
        original_topic="plans",
        original_partition=None,
        original_offset=None,
        attempts=1,
        dead_lettered_at=T0,
        envelope=b"\x00\xffenvelope",
    )


def test_dlq_entries_are_inserted_replaced_and_read_locked(store: PostgresOperationStore) -> None:
    pending = dlq_entry("dlq-a", DlqStatus.PENDING_REVIEW, "bad")
    with store.unit_of_work() as uow:
        uow.put_dlq_entries([pending, dlq_entry("dlq-b", DlqStatus.RESOLVED, "old")])
        uow.put_dlq_entries([])
    replayed = dlq_entry("dlq-a", DlqStatus.REPLAYED, "bad again")
    with store.unit_of_work() as uow:
        uow.put_dlq_entries([replayed])
        found = uow.dlq_entries(["dlq-a", "dlq-missing", "dlq-a"])
    assert found == {"dlq-a": replayed}


# -- batches -------------------------------------------------------------------------------------


def _apply_batch(store: PostgresOperationStore, tag: str, n: int) -> None:
    """The applier's three transactions (DESIGN.md §4) for a batch of ``n`` fresh plans."""
    ops = [new_op(f"{tag}-{i}") for i in range(n)]
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(op, f"plan-{op.operation_id}".encode()) for op in ops])
        assert len(uow.lock_operations([op.operation_id for op in ops])) == n
        assert uow.document_revisions([(SPACE, op.document_id) for op in ops]) == {}
    applied = [op.transition(Stage.GRAPH_APPLIED, T0) for op in ops]
    with store.unit_of_work() as uow:
        uow.save_operations(applied)
    committed = [op.transition(Stage.STATE_COMMITTED, T0) for op in applied]
    with store.unit_of_work() as uow:
        states = [
            state(op.document_id, 1, op.operation_id, (fact(f"f-{op.operation_id}"),)) for op in ops
        ]
        assert uow.commit_document_states(states) == set()
        uow.register_entities([reg(f"{tag} {i}", f"node-{tag}-{i}", f"a{i}") for i in range(n)])
        uow.save_operations(
            [s for op in committed for s in (op, op.transition(Stage.COMPLETED, T0))]
        )
        assert uow.parked_behind([(SPACE, op.document_id, 1) for op in ops]) == []


def test_a_batch_costs_the_same_few_statements_whatever_its_size(
    store: PostgresOperationStore, pg: PostgresSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    original = psycopg.Cursor.execute

    def counting(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if query != "":  # not the pool's liveness check on checkout
            statements.append(str(query).split()[0])
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    monkeypatch.setattr(psycopg.Cursor, "executemany", None)  # set statements only

    _apply_batch(store, "one", 1)
    for_one, statements[:] = list(statements), []
    _apply_batch(store, "many", 200)

    assert statements == for_one
    # 3 reads/inserts; save = savepoint + 1 + release; CAS + facts; registry lock + check +
    # savepoint/upsert/release; save; parked.
    assert len(statements) <= 17, statements
    assert query(pg, "SELECT stage, count(*) FROM operations GROUP BY stage") == [
        ("COMPLETED", 201)
    ]
    assert query(pg, "SELECT count(*) FROM outbox") == [(4 * 201,)]
    assert query(pg, "SELECT count(*) FROM document_history") == [(201,)]
    assert query(pg, "SELECT count(*) FROM fact_sources") == [(201,)]
    assert len(registry(pg)) == 201


def test_a_purged_leader_strands_its_followers_unless_another_operation_is_on_its_way(
    store: PostgresOperationStore,
) -> None:
    # Given v1 (expects 0) dead-lettered with its entry purged, and v2 (expects 1) parked
    lead, follower = new_op("lead", doc="d"), new_op("next", doc="d", expected=1)
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(op, b"plan") for op in (lead, follower)])
        dead = lead.transition(Stage.DEAD_LETTERED, T0).model_copy(update={"dlq_id": "dlq-a"})
        uow.save_operations([dead, follower.transition(Stage.PARKED, T0)])
        uow.put_dlq_entries([dlq_entry("dlq-a", DlqStatus.RESOLVED, "purged")])
    with store.unit_of_work() as uow:
        # Then revision 1 never commits: v1 is a purged leader, v2 is stranded
        assert list(uow.purged_leaders_at([(SPACE, "d", 0)]).values()) == [dead]
    stranded = store.stranded_parked(older_than_s=0, limit=10)
    assert [op.operation_id for op in stranded] == ["op-next"]

    # When another operation expecting revision 0 is on its way (a replan, FAILED in a tier)
    again = new_op("again", doc="d")
    with store.unit_of_work() as uow:
        uow.insert_operations([NewOperation(again, b"plan")])
        uow.save_operations([again.transition(Stage.FAILED, T0)])

    # Then nothing is stranded
    with store.unit_of_work() as uow:
        assert uow.purged_leaders_at([(SPACE, "d", 0)]) == {}
    assert store.stranded_parked(older_than_s=0, limit=10) == []


@pytest.mark.parametrize(
    ("mode", "generic_plans_kept"), [("force_custom_plan", False), ("auto", True)]
)
def test_the_store_plans_a_prepared_statement_again_at_every_run_unless_told_otherwise(
    pg: PostgresSettings, mode: str, generic_plans_kept: bool
) -> None:
    # Issue 20: under "auto" PostgreSQL keeps a generic plan after five runs. The registry
    # lookup's, made while the table was small, scanned the whole space with a linear search of
    # the batch's names per row as the registry grew: seconds per batch until autoanalyze.
    settings = pg.model_copy(update={"plan_cache_mode": mode})
    # a batch of 100 small plans' names: planned with them, a run looks costly
    registrations = [reg(f"Name {i}", f"n{i}") for i in range(1000)]
    batch = lookup_parameters(registrations, registry_nodes(registrations))
    with psycopg.connect(settings.conninfo()) as conn:
        for _ in range(8):
            conn.execute(SELECT_REGISTRY, batch, prepare=True)
        ((generic, custom),) = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%FROM entity_registry%'"
        ).fetchall()
    assert (generic > 0) is generic_plans_kept, (generic, custom)
    assert custom + generic == 8


@pytest.mark.parametrize("analyzed", [False, True])
def test_the_registry_lookup_reads_the_rows_of_its_keys_not_the_space(
    pg: PostgresSettings, analyzed: bool
) -> None:
    # Issue 20: "space = ANY(..) AND entity_type = ANY(..) AND normalized_name = ANY(..)" was
    # planned as a scan of the whole space, each row tested against the arrays, with statistics
    # or without: O(registry) per batch. Now one index probe per key and per node.
    stored = 20_000
    # a batch of 10 small plans: 50 names stored, 50 new
    batch = [reg(f"Name {i}", f"n{i}") for i in range(stored - 49, stored + 51)]
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO entity_registry (space, entity_type, normalized_name, name, node_id)"
            " SELECT %s, 'Person', 'name ' || g, 'Name ' || g, 'n' || g"
            " FROM generate_series(1, %s) AS g",
            (SPACE, stored),
        )
        if analyzed:
            conn.execute("ANALYZE entity_registry")
        parameters = lookup_parameters(batch, registry_nodes(batch))
        ((plan,),) = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + SELECT_REGISTRY, parameters
        ).fetchall()
        found = conn.execute(SELECT_REGISTRY, parameters).fetchall()

    def rows_read(node: dict[str, Any]) -> int:
        here = 0
        if node.get("Relation Name") == "entity_registry":
            here = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node[
                "Actual Loops"
            ]
        return here + sum(rows_read(child) for child in node.get("Plans", []))

    assert rows_read(plan[0]["Plan"]) <= 2 * len(batch), json.dumps(plan, indent=1)[:4000]
    assert len(found) == 2 * 50  # each stored row by its key and by its node


def test_the_registry_lookup_is_planned_afresh_at_every_batch(pg: PostgresSettings) -> None:
    # Issue 20: its generic plan, made while the registry was small, scanned the whole space as
    # it grew. Prepared statements are per session: the writer runs on this one.
    with psycopg.connect(pg.conninfo()) as conn:
        writer = PostgresRegistryWriter(conn, event_encoder=encode, operations_topic=TOPIC)
        for batch in range(8):
            with conn.transaction():
                writer.register_entities(
                    [reg(f"Name {batch} {i}", f"n{batch}-{i}") for i in range(3)]
                )
        prepared = [
            statement
            for (statement,) in conn.execute("SELECT statement FROM pg_prepared_statements")
        ]
    assert any("INSERT INTO entity_registry" in s for s in prepared), prepared  # the upsert is
    assert not any("FROM entity_registry" in s and "FOR UPDATE" in s for s in prepared), prepared
