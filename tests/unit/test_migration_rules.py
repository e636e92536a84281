"""Rules every new migration keeps, checked on the SQL files: an upgrade must not stop the
workers of the version before, which go on writing while `db migrate` runs."""

from __future__ import annotations

import re

from graph_ingest.store.migrate import Migration, available_migrations

# Migrations shipped before the rule: applied everywhere already, never run again.
LAST_BEFORE_THE_RULE = "0014"

_CREATE_TABLE = re.compile(
    r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:[%\w]+\.)?(?P<table>\w+)", re.IGNORECASE
)
_CREATE_INDEX = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?P<concurrently>CONCURRENTLY\s+)?"
    r"(?:IF\s+NOT\s+EXISTS\s+)?(?:\w+\s+)?ON\s+(?:ONLY\s+)?(?:[%\w]+\.)?(?P<table>\w+)",
    re.IGNORECASE,
)


def blocking_index_builds(migration: Migration) -> list[str]:
    """The tables ``migration`` indexes in a way that blocks their writers: without
    CONCURRENTLY (or in a transaction) on a table an earlier migration created."""
    text = migration.sql.decode()
    created_here = {m["table"].lower() for m in _CREATE_TABLE.finditer(text)}
    return [
        m["table"]
        for m in _CREATE_INDEX.finditer(text)
        if m["table"].lower() not in created_here
        and not (m["concurrently"] and migration.outside_a_transaction)
    ]


def test_a_new_migration_indexes_an_existing_table_concurrently() -> None:
    new = [m for m in available_migrations() if m.version > LAST_BEFORE_THE_RULE]
    assert new, "the rule checks at least the outbox index (0015)"
    assert {m.version: blocking_index_builds(m) for m in new} == {m.version: [] for m in new}


def test_the_rule_tells_a_blocking_build_from_a_concurrent_one() -> None:
    def migration(text: str) -> Migration:
        return Migration("0099", "example", text.encode())

    fresh = migration("CREATE TABLE t (a int);\nCREATE INDEX t_a_idx ON t (a);")
    assert blocking_index_builds(fresh) == []
    blocking = migration("CREATE UNIQUE INDEX IF NOT EXISTS o_idx ON ONLY outbox (id);")
    assert blocking_index_builds(blocking) == ["outbox"]
    unnamed = migration("CREATE INDEX ON %I.operations (stage);")
    assert blocking_index_builds(unnamed) == ["operations"]
    in_a_transaction = migration("CREATE INDEX CONCURRENTLY o_idx ON outbox (id);")
    assert blocking_index_builds(in_a_transaction) == ["outbox"]
    concurrent = migration("-- migrate: outside a transaction\n" + in_a_transaction.sql.decode())
    assert blocking_index_builds(concurrent) == []
    # The rule would have caught 0015 as it first shipped.
    assert blocking_index_builds(
        migration("CREATE INDEX outbox_published_idx ON outbox (published_at);")
    ) == ["outbox"]
    # and it knows the migrations before it: 0004 indexed document_states in a transaction.
    (before,) = [m for m in available_migrations() if m.version == "0004"]
    assert blocking_index_builds(before) == ["document_states", "document_states"]
