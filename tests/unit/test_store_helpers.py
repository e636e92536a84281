"""Pure parts of the PostgreSQL store: migrations on disk, batch checks, row conversions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from graph_ingest.domain.candidates import ExtractionIssue
from graph_ingest.domain.operation import ErrorInfo, Operation, OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState, FactKind, FactSource
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.errors import StoreError
from graph_ingest.store.migrate import (
    OUTSIDE_A_TRANSACTION,
    Migration,
    available_migrations,
    in_runs,
)
from graph_ingest.store.postgres.documents import check_commit_batch, stamp_committed_at
from graph_ingest.store.postgres.operation_rows import operation_from_row, snapshot_values
from graph_ingest.store.postgres.operations import snapshot_chains
from graph_ingest.store.postgres.params import json_text, key_columns
from graph_ingest.store.submissions import (
    MAX_ISSUE_MESSAGE_LENGTH,
    MAX_SUBMISSION_ISSUES,
    submission_issues,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def op(n: str) -> Operation:
    return Operation.prepared(
        operation_id=n, space="kb", document_id="d", expected_revision=0, fingerprint="v1:x", at=T0
    )


def state(doc: str, *fact_ids: str) -> DocumentState:
    return DocumentState(
        space="kb",
        document_id=doc,
        revision=1,
        operation_id="op",
        content_hash="h",
        document_version="v1",
        fact_sources=tuple(FactSource(fact_id=f, kind=FactKind.NODE) for f in fact_ids),
    )


def test_migrations_are_versioned_in_order_and_carry_the_outbox_shape() -> None:
    migrations = available_migrations()
    assert [m.version for m in migrations] == sorted(m.version for m in migrations)
    assert migrations[0].version == "0001" and migrations[0].name == "initial"
    text = migrations[0].sql.decode()
    assert "id             BIGSERIAL PRIMARY KEY" in text
    assert "WHERE published_at IS NULL" in text


def test_a_migration_outside_a_transaction_applies_alone_statement_by_statement() -> None:
    plain = [Migration(f"000{i}", "plain", b"CREATE TABLE t (a int); SELECT 1;") for i in (1, 2)]
    outside = Migration(
        "0003",
        "outside",
        OUTSIDE_A_TRANSACTION
        + b"-- a comment; with a semicolon\n"
        + b"DROP INDEX CONCURRENTLY IF EXISTS i;\n"
        + b"CREATE INDEX CONCURRENTLY i\n    ON t (a) WHERE a IS NOT NULL;  \n",
    )
    last = Migration("0004", "plain", b"SELECT 2;")
    assert not plain[0].outside_a_transaction and outside.outside_a_transaction
    assert in_runs([*plain, outside, outside, last]) == [plain, [outside], [outside], [last]]
    assert in_runs([outside, *plain]) == [[outside], plain]
    assert outside.statements() == [
        "DROP INDEX CONCURRENTLY IF EXISTS i",
        "CREATE INDEX CONCURRENTLY i\n    ON t (a) WHERE a IS NOT NULL",
    ]


def test_a_dollar_quoted_body_keeps_its_own_statements() -> None:
    migration = Migration(
        "0003",
        "outside",
        OUTSIDE_A_TRANSACTION
        + b"CREATE FUNCTION pg_temp.f() RETURNS void LANGUAGE plpgsql AS $$\n"
        + b"BEGIN\n    PERFORM 1;\n    -- a comment;\n    PERFORM 2;\nEND\n$$;\n"
        + b"SELECT pg_temp.f();\nSELECT 3",
    )
    assert migration.statements() == [
        "CREATE FUNCTION pg_temp.f() RETURNS void LANGUAGE plpgsql AS $$\n"
        "BEGIN\n    PERFORM 1;\n    PERFORM 2;\nEND\n$$",
        "SELECT pg_temp.f()",
        "SELECT 3",
    ]


def shipped_migration(version: str) -> Migration:
    (migration,) = [m for m in available_migrations() if m.version == version]
    return migration


def test_the_lz4_migration_alters_one_table_per_statement() -> None:
    migration = shipped_migration("0016")
    assert migration.outside_a_transaction
    function, *calls = migration.statements()
    assert function.startswith("CREATE OR REPLACE FUNCTION pg_temp.compress_with_lz4(")
    assert [call.split("(")[1].split(",")[0].strip() for call in calls] == [
        "'operations'",
        "'plan_claims'",
        "'document_states'",
        "'document_history'",
        "'outbox'",
        "'dlq_entries'",
    ]


def test_the_outbox_index_is_built_concurrently() -> None:
    migration = shipped_migration("0015")
    assert migration.outside_a_transaction
    assert [s.split(" ON ")[0] for s in migration.statements()] == [
        "DROP INDEX CONCURRENTLY IF EXISTS outbox_published_idx",
        "CREATE INDEX CONCURRENTLY outbox_published_idx",
    ]


def test_snapshot_chains_group_consecutive_snapshots_per_operation() -> None:
    a1, b1 = op("a"), op("b")
    a2 = a1.transition(Stage.GRAPH_APPLIED, T0)
    a3 = a2.transition(Stage.STATE_COMMITTED, T0)
    assert snapshot_chains([a2, b1, a3]) == {"a": [a2, a3], "b": [b1]}
    with pytest.raises(StoreError) as raised:
        snapshot_chains([a3, a2])
    assert raised.value.code is StatusCode.INVALID_ARGUMENT


def test_commit_batch_refuses_repeated_documents() -> None:
    check_commit_batch([state("d1", "f1", "f2"), state("d2", "f1")])
    with pytest.raises(StoreError, match="appears twice"):
        check_commit_batch([state("d1"), state("d1")])


def test_a_state_listing_a_fact_source_twice_is_refused_when_planned() -> None:
    with pytest.raises(ValidationError, match=r"duplicate fact source identities: \['f1'\]"):
        state("d1", "f1", "f2", "f1")


def test_stamp_fills_only_missing_commit_times() -> None:
    stamped_before = state("d1").model_copy(update={"committed_at": T0})
    first, second = stamp_committed_at([stamped_before, state("d2")])
    assert first.committed_at == T0
    assert second.committed_at is not None and second.committed_at.tzinfo is not None


@pytest.mark.parametrize("with_v2_fields", [False, True])
def test_operation_columns_round_trip(with_v2_fields: bool) -> None:
    error = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="X", message="down")
    v2_fields: dict[str, object] = {
        "last_error": error.model_copy(update={"error_id": "e" * 32, "trace_id": "7" * 32}),
        "plan_kind": PlanKind.INGESTION,
        "submission_id": "sub-1",
        "retry_tier": 2,
        "parked_behind": "op_leader",
        "waits": (OutageWait(dependency="neo4j", started_at=T0, ended_at=T0 + timedelta(1)),),
    }
    original = (
        op("a")
        .transition(Stage.FAILED, T0 + timedelta(seconds=1), error)
        .model_copy(update={"next_retry_at": T0 + timedelta(seconds=5), "dlq_id": "q"})
        .model_copy(update=v2_fields if with_v2_fields else {})
    )
    values = snapshot_values(original)
    row = {
        **values,
        # what psycopg hands back for JSONB: the JSON values themselves, as the statements
        # were given them (json_text)
        "stage_times": json.loads(json_text(values["stage_times"])),
        "details": json.loads(json_text(values["details"])),
        "space": "kb",
        "document_id": "d",
        "expected_revision": 0,
        "fingerprint": "v1:x",
        "created_at": T0,
    }
    assert operation_from_row(row) == original


def test_a_submission_keeps_its_first_issues_with_their_messages_cut() -> None:
    issues = [
        ExtractionIssue(code="LOW_CONFIDENCE", message="x" * 1_000, chunk_id=f"c{i}")
        for i in range(MAX_SUBMISSION_ISSUES + 3)
    ]

    kept = submission_issues(issues)

    assert [i.chunk_id for i in kept] == [f"c{i}" for i in range(MAX_SUBMISSION_ISSUES)]
    assert {len(i.message) for i in kept} == {MAX_ISSUE_MESSAGE_LENGTH}
    assert kept[0].message.endswith("…") and kept[0].code == "LOW_CONFIDENCE"


def test_key_columns_turns_key_tuples_into_one_array_per_column() -> None:
    keys = [("s", "d1", 1), ("s", "d2", 2)]
    assert key_columns(("space", "document_id", "revision"), keys) == {
        "space": ["s", "s"],
        "document_id": ["d1", "d2"],
        "revision": [1, 2],
    }
    assert key_columns(("space",), []) == {"space": []}
