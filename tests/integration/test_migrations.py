"""Schema migrations on the real PostgreSQL: concurrent runs, the outbox's index built while
workers go on writing to the outbox, and the values an upgrade compresses with lz4."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from psycopg import sql

import graph_ingest.store.migrate as migrate_module
from graph_ingest.settings import Settings
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.errors import StoreError
from graph_ingest.store.migrate import Migration, available_migrations, migrate
from graph_ingest.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OUTBOX_INDEX = "outbox_published_idx"
ADD_OUTBOX_ROW = "INSERT INTO outbox (topic, message_value) VALUES ('t', 'v'::bytea)"


@pytest.fixture
def schema(stack_settings: Settings) -> Iterator[PostgresSettings]:
    settings = stack_settings.postgres.model_copy(update={"schema_name": f"t_{uuid.uuid4().hex}"})
    yield settings
    with psycopg.connect(settings.conninfo(), autocommit=True) as conn:
        for name in (settings.schema_name, f"{settings.schema_name}_read"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def connect(settings: PostgresSettings, *, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(settings.conninfo(), autocommit=autocommit)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(settings.schema_name)))
    if not autocommit:
        conn.commit()
    return conn


def query(settings: PostgresSettings, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with connect(settings) as conn:
        return conn.execute(text, params).fetchall()


def as_before_the_outbox_index(settings: PostgresSettings) -> None:
    """A schema migrated up to the version before the outbox's index (0015)."""
    migrate(settings)
    with connect(settings) as conn:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(OUTBOX_INDEX)))
        conn.execute("DELETE FROM schema_migrations WHERE version = '0015'")


def index_builder(settings: PostgresSettings) -> int | None:
    """The backend building the outbox's index while it waits for a lock, if one does."""
    rows = query(
        settings,
        "SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND wait_event_type = 'Lock'"
        " AND pid <> pg_backend_pid()",
        f"%INDEX%{OUTBOX_INDEX}%",
    )
    return rows[0][0] if rows else None


def index_validity(settings: PostgresSettings) -> list[bool]:
    return [
        valid
        for (valid,) in query(
            settings,
            "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " WHERE c.relname = %s AND c.relnamespace = %s::regnamespace",
            OUTBOX_INDEX,
            settings.schema_name,
        )
    ]


def migrating(settings: PostgresSettings) -> Future[list[str]]:
    return ThreadPoolExecutor(1).submit(migrate, settings)


def test_migrate_is_idempotent_and_safe_to_run_concurrently(schema: PostgresSettings) -> None:
    barrier = threading.Barrier(4)

    def run() -> list[str]:
        barrier.wait()
        return migrate(schema)

    with ThreadPoolExecutor(4) as executor:
        results = [f.result(timeout=60) for f in [executor.submit(run) for _ in range(4)]]
    versions = [m.version for m in available_migrations()]
    assert versions[:2] == ["0001", "0002"]
    assert sorted(results) == [[], [], [], versions]
    assert migrate(schema) == []
    assert query(schema, "SELECT version FROM schema_migrations ORDER BY version") == [
        (v,) for v in versions
    ]
    assert index_validity(schema) == [True]


def test_the_outbox_index_builds_while_workers_write_to_the_outbox(
    schema: PostgresSettings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    as_before_the_outbox_index(schema)
    monkeypatch.setattr(migrate_module, "WAITING_LOG_EVERY_S", 0.1)
    with connect(schema, autocommit=False) as writing, caplog.at_level(logging.WARNING):
        writing.execute(ADD_OUTBOX_ROW)  # a worker's transaction, open when the migration starts
        migration = migrating(schema)
        wait_until(lambda: index_builder(schema), timeout_s=20, what="the index build to wait")
        # The migration says which session it waits for, so that an operator can end it.
        wait_until(
            lambda: (
                f"waits for 1 session(s) to end their transactions: pid "
                f"{writing.info.backend_pid} (idle in transaction" in caplog.text
            ),
            timeout_s=20,
            what="the log naming the open transaction",
        )
        # Another worker's write goes through while the index waits to build: a plain CREATE
        # INDEX would hold it behind its own lock until the build ended.
        with connect(schema, autocommit=False) as another:
            another.execute("SET LOCAL lock_timeout = '3s'")
            another.execute(ADD_OUTBOX_ROW)
            another.commit()
        writing.commit()
    assert migration.result(timeout=60) == ["0015"]
    assert index_validity(schema) == [True]
    assert query(schema, "SELECT count(*) FROM outbox") == [(2,)]
    assert query(schema, "SELECT version FROM schema_migrations WHERE version = '0015'")


def test_an_index_build_cut_short_completes_when_the_migration_runs_again(
    schema: PostgresSettings,
) -> None:
    as_before_the_outbox_index(schema)
    with connect(schema, autocommit=False) as writing:
        writing.execute(ADD_OUTBOX_ROW)
        migration = migrating(schema)
        builder = wait_until(
            lambda: index_builder(schema), timeout_s=20, what="the index build to wait"
        )
        query(schema, "SELECT pg_cancel_backend(%s)", builder)
        with pytest.raises(StoreError, match="cancel"):
            migration.result(timeout=60)
        writing.commit()
    assert index_validity(schema) == [False]  # what PostgreSQL leaves of a cancelled build
    assert not query(schema, "SELECT 1 FROM schema_migrations WHERE version = '0015'")

    assert migrate(schema) == ["0015"]
    assert index_validity(schema) == [True]


def test_a_migration_waiting_for_another_says_which_session_holds_the_schema(
    schema: PostgresSettings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(migrate_module, "WAITING_LOG_EVERY_S", 0.1)
    with connect(schema) as holder, caplog.at_level(logging.INFO):
        holder.execute(
            "SELECT pg_advisory_lock(hashtext('graph_ingest.migrate'), hashtext(%s))",
            (schema.schema_name,),
        )
        migration = migrating(schema)
        wait_until(
            lambda: (
                f"for another migration of it to finish: pid {holder.info.backend_pid} ("
                in caplog.text
            ),
            timeout_s=20,
            what="the log naming the session that holds the migration lock",
        )
        assert not migration.done()
        holder.execute(
            "SELECT pg_advisory_unlock(hashtext('graph_ingest.migrate'), hashtext(%s))",
            (schema.schema_name,),
        )
        assert migration.result(timeout=60) == [m.version for m in available_migrations()]


def lz4_columns(settings: PostgresSettings) -> set[tuple[str, str]]:
    """The schema's table columns that compress with lz4."""
    rows = query(
        settings,
        "SELECT c.relname, a.attname FROM pg_attribute AS a JOIN pg_class AS c"
        " ON c.oid = a.attrelid WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'r'"
        " AND a.attcompression = 'l'",
        settings.schema_name,
    )
    return {(table, column) for table, column in rows}


def test_an_upgrade_compresses_new_values_with_lz4_and_older_ones_stay_readable(
    schema: PostgresSettings,
) -> None:
    migrate(schema)
    upgraded = lz4_columns(schema)
    assert upgraded == {
        ("operations", "plan_bytes"),
        ("plan_claims", "plan_bytes"),
        *(("document_states", c) for c in ("node_ids", "edge_keys", "superseded_edge_keys")),
        ("document_states", "kept_edge_keys"),
        ("document_history", "state"),
        ("outbox", "message_value"),
        ("dlq_entries", "envelope"),
    }
    with connect(schema) as conn:  # the schema as 0015 left it
        for table, column in upgraded:
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET COMPRESSION default").format(
                    sql.Identifier(table), sql.Identifier(column)
                )
            )
        conn.execute("DELETE FROM schema_migrations WHERE version = '0016'")
    value = b"".join(f"event {i:05d};".encode() for i in range(3000))
    add_row = "INSERT INTO outbox (topic, message_value) VALUES (%s, %s)"
    query_rows = "SELECT topic, pg_column_compression(message_value), message_value FROM outbox"
    with connect(schema) as conn:
        conn.execute(add_row, ("before", value))

    assert migrate(schema) == ["0016"]
    assert lz4_columns(schema) == upgraded
    with connect(schema) as conn:
        conn.execute(add_row, ("after", value))
    assert sorted(query(schema, query_rows)) == [
        ("after", "lz4", value),
        ("before", "pglz", value),
    ]


def test_a_warning_a_migration_raises_reaches_the_log(
    schema: PostgresSettings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As 0016 warns on a server without lz4 (this one has it): psycopg drops what the server
    says unless asked, and the notices of IF NOT EXISTS stay out of the log."""
    warning = Migration(
        "9999",
        "warns",
        b"DO $$ BEGIN RAISE NOTICE 'quiet'; RAISE WARNING 'no lz4 here'; END $$;",
    )
    monkeypatch.setattr(
        migrate_module, "available_migrations", lambda: [*available_migrations(), warning]
    )
    migrate(schema)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert migrate(schema) == []  # CREATE SCHEMA / TABLE IF NOT EXISTS: notices only
        assert "PostgreSQL says" not in caplog.text
        with connect(schema) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version = '9999'")
        assert migrate(schema) == ["9999"]
    said = [r.getMessage() for r in caplog.records if "PostgreSQL says" in r.getMessage()]
    assert said == [f"schema {schema.schema_name}: PostgreSQL says: no lz4 here"]


def test_where_the_server_refuses_lz4_the_migration_warns_and_goes_on(
    schema: PostgresSettings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """0016's own function, on a column PostgreSQL refuses to compress as a server without lz4
    refuses lz4 itself (feature_not_supported): the migration applies, and says so."""
    (lz4,) = [m for m in available_migrations() if m.version == "0016"]
    function = lz4.sql[: lz4.sql.index(b"SELECT pg_temp.compress_with_lz4(")]
    refused = Migration(
        "9999",
        "refused",
        function + b"SELECT pg_temp.compress_with_lz4('schema_migrations', 'applied_at');\n",
    )
    monkeypatch.setattr(
        migrate_module, "available_migrations", lambda: [*available_migrations(), refused]
    )
    with caplog.at_level(logging.WARNING):
        assert migrate(schema)[-1] == "9999"
    assert (
        f"schema {schema.schema_name}: PostgreSQL says: schema_migrations: this PostgreSQL"
        " server has no lz4; its values stay compressed with pglz" in caplog.text
    )
