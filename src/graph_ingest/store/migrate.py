"""Versioned schema migrations: ``store/migrations/NNNN_<name>.sql``, each applied once, in order.

``migrate`` creates the schema if absent and applies every pending migration under an advisory
lock (per database and schema), so workers that start at the same moment wait for each other
instead of racing: the first applies, the others find nothing left to do.

Consecutive migrations apply in one transaction: a failing one rolls them all back. A migration
whose first line is ``-- migrate: outside a transaction`` runs alone, statement by statement in
autocommit mode, for what PostgreSQL refuses inside a transaction (``CREATE INDEX CONCURRENTLY``,
which lets the workers go on writing to a large table while its index builds), and for changes
that lock one table at a time and should hold no lock past their own statement. Each of its
statements ends with ``;`` at the end of a line (a ``$$``-quoted body, a function's or a ``DO``
block's, holds its own), and it must complete when run again after a failure part way
(``IF EXISTS``): a failure leaves the migrations before it applied.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.postgres.translate import translating
from graph_ingest.waiting import thread_beside

log = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql")
_LOCK_NAMESPACE = "graph_ingest.migrate"
OUTSIDE_A_TRANSACTION = b"-- migrate: outside a transaction\n"
_STATEMENT_END = re.compile(r";[ \t]*$")
_DOLLAR_QUOTE = "$$"
# How often a migrate call waiting for another one tries the lock again, and tells it.
_LOCK_RETRY_S = 0.1
WAITING_LOG_EVERY_S = 30.0


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    name: str
    sql: bytes

    @property
    def outside_a_transaction(self) -> bool:
        return self.sql.startswith(OUTSIDE_A_TRANSACTION)

    def statements(self) -> list[str]:
        """The statements of a migration outside a transaction, comment lines left out."""
        found: list[str] = []
        lines: list[str] = []
        in_body = False
        for line in self.sql.decode().splitlines():
            if line.lstrip().startswith("--"):
                continue
            lines.append(line)
            if line.count(_DOLLAR_QUOTE) % 2:
                in_body = not in_body
            if not in_body and _STATEMENT_END.search(line):
                found.append("\n".join(lines).rstrip()[:-1])
                lines = []
        found.append("\n".join(lines))
        return [statement.strip() for statement in found if statement.strip()]


def available_migrations() -> list[Migration]:
    """The migrations shipped with the package, ordered by version."""
    found: dict[str, Migration] = {}
    for entry in resources.files("graph_ingest.store").joinpath("migrations").iterdir():
        match = _FILE_NAME.fullmatch(entry.name)
        if match is None:
            continue
        version = match["version"]
        if version in found:
            raise ConfigurationError(
                f"two migrations share version {version}: {found[version].name}, {match['name']}"
            )
        found[version] = Migration(version, match["name"], entry.read_bytes())
    return [found[v] for v in sorted(found)]


def in_runs(pending: list[Migration]) -> list[list[Migration]]:
    """``pending`` cut into what applies together: consecutive migrations in a transaction share
    one run, a migration outside a transaction has a run of its own."""
    runs: list[list[Migration]] = []
    for migration in pending:
        if migration.outside_a_transaction or not runs or runs[-1][0].outside_a_transaction:
            runs.append([migration])
        else:
            runs[-1].append(migration)
    return runs


def migrate(settings: PostgresSettings) -> list[str]:
    """Bring ``settings.schema_name`` up to date; return the versions this call applied."""
    migrations = available_migrations()
    schema = settings.schema_name
    with (
        translating(),
        psycopg.connect(settings.conninfo(), autocommit=True) as conn,
        _migration_lock(conn, schema),
    ):
        conn.add_notice_handler(functools.partial(_log_server_warning, schema))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version TEXT PRIMARY KEY,"
            " name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        unknown = done - {m.version for m in migrations}
        if unknown:
            log.warning(
                "schema %s has migrations this code does not know: %s (newer code ran?)",
                schema,
                ", ".join(sorted(unknown)),
            )
        applied = []
        for run in in_runs([m for m in migrations if m.version not in done]):
            for migration in run:
                log.info("schema %s: applying %s_%s", schema, migration.version, migration.name)
            if run[0].outside_a_transaction:
                with _telling_what_blocks(settings, conn.info.backend_pid, run[0]):
                    for statement in run[0].statements():
                        conn.execute(statement.encode())
                _record(conn, run[0])
            else:
                with conn.transaction():
                    for migration in run:
                        # No parameters: the simple protocol, several statements in one call.
                        conn.execute(migration.sql)
                        _record(conn, migration)
            applied += [m.version for m in run]
    return applied


def _log_server_warning(schema: str, diagnostic: psycopg.errors.Diagnostic) -> None:
    """What a migration says with ``RAISE WARNING`` (0016: a server without lz4), which psycopg
    would drop; the server's notices (``IF NOT EXISTS`` skips) stay out of the log."""
    if diagnostic.severity_nonlocalized == "WARNING":
        log.warning("schema %s: PostgreSQL says: %s", schema, diagnostic.message_primary)


def _record(conn: psycopg.Connection, migration: Migration) -> None:
    conn.execute(
        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
        (migration.version, migration.name),
    )


# The sessions a migration's statement waits for, with what they are doing.
BLOCKING_SESSIONS = """
SELECT pid, state, application_name,
       coalesce(extract(epoch FROM now() - xact_start), 0)::float8 AS open_s,
       left(query, 120) AS query
FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids(%s)) ORDER BY xact_start
"""


@contextmanager
def _telling_what_blocks(
    settings: PostgresSettings, migrating_pid: int, migration: Migration
) -> Iterator[None]:
    """Log, every ``WAITING_LOG_EVERY_S`` while the block runs, the sessions the migration
    waits for: a concurrent index build waits for every transaction open on its table when it
    starts, and an operator must be able to see which one to end."""

    def watch(done: threading.Event) -> None:
        try:
            with psycopg.connect(settings.conninfo(), autocommit=True) as conn:
                while not done.wait(WAITING_LOG_EVERY_S):
                    blocking = conn.execute(BLOCKING_SESSIONS, (migrating_pid,)).fetchall()
                    if blocking:
                        log.warning(
                            "schema %s: %s_%s waits for %d session(s) to end their "
                            "transactions: %s",
                            settings.schema_name,
                            migration.version,
                            migration.name,
                            len(blocking),
                            "; ".join(
                                f"pid {pid} ({state}, {app or 'no application name'}, "
                                f"transaction open {open_s:.0f} s): {query!r}"
                                for pid, state, app, open_s, query in blocking
                            ),
                        )
        except psycopg.Error as exc:  # only the telling is lost; the migration goes on
            log.debug("watching what %s_%s waits for: %s", migration.version, migration.name, exc)

    with thread_beside(watch, name="migrate-watch"):
        yield


# Who holds the schema's migration lock (pg_advisory_lock(int4, int4): classid, objid, subid 2).
MIGRATION_LOCK_HOLDERS = """
SELECT a.pid, a.application_name, a.state,
       extract(epoch FROM now() - a.backend_start)::float8 AS connected_s
FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = (hashtext(%s)::bigint & 4294967295)::oid
  AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid
"""


@contextmanager
def _migration_lock(conn: psycopg.Connection, schema: str) -> Iterator[None]:
    """The schema's migration lock, held by this session until the block ends.

    Tried again and again rather than waited for: a statement waiting for the lock would hold a
    snapshot, which ``CREATE INDEX CONCURRENTLY`` in the session holding it waits for, and the
    two would deadlock."""
    key = (_LOCK_NAMESPACE, schema)
    started = told = time.monotonic()
    while not _scalar(conn, "SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))", key):
        if time.monotonic() - told >= WAITING_LOG_EVERY_S:
            told = time.monotonic()
            log.info(
                "schema %s: waiting %.0f s for another migration of it to finish: %s",
                schema,
                told - started,
                "; ".join(
                    f"pid {pid} ({app or 'no application name'}, {state}, "
                    f"connected {connected_s:.0f} s ago)"
                    for pid, app, state, connected_s in conn.execute(MIGRATION_LOCK_HOLDERS, key)
                )
                or "its session just ended",
            )
        time.sleep(_LOCK_RETRY_S)
    try:
        yield
    finally:
        if not conn.broken:  # a lost connection has let the lock go already
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s), hashtext(%s))", key)


def _scalar(conn: psycopg.Connection, query: str, params: tuple[str, str]) -> object:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


__all__ = ["Migration", "available_migrations", "in_runs", "migrate"]
