"""Versioned schema migrations: ``store/migrations/NNNN_<name>.sql``, each applied once, in order.

``migrate`` creates the schema if absent and applies every pending migration in ONE transaction
under a transaction-scoped advisory lock (per database and schema), so workers that start at the
same moment wait for each other instead of racing: the first applies, the others find nothing
left to do. A failing migration rolls everything back; the schema stays at its previous version.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.settings.postgres import PostgresSettings
from graph_ingest.store.postgres.translate import translating

log = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql")
_LOCK_NAMESPACE = "graph_ingest.migrate"


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    name: str
    sql: bytes


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


def migrate(settings: PostgresSettings) -> list[str]:
    """Bring ``settings.schema_name`` up to date; return the versions this call applied."""
    migrations = available_migrations()
    schema = sql.Identifier(settings.schema_name)
    with (
        translating(),
        psycopg.connect(settings.conninfo(), autocommit=False) as conn,
        conn.transaction(),
        conn.cursor() as cur,
    ):
        cur.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))",
            (_LOCK_NAMESPACE, settings.schema_name),
        )
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        cur.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
        cur.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version TEXT PRIMARY KEY,"
            " name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cur.execute("SELECT version FROM schema_migrations")
        done = {row[0] for row in cur.fetchall()}
        unknown = done - {m.version for m in migrations}
        if unknown:
            log.warning(
                "schema %s has migrations this code does not know: %s (newer code ran?)",
                settings.schema_name,
                ", ".join(sorted(unknown)),
            )
        applied = []
        for migration in migrations:
            if migration.version in done:
                continue
            log.info(
                "schema %s: applying %s_%s",
                settings.schema_name,
                migration.version,
                migration.name,
            )
            cur.execute(migration.sql)  # no parameters: simple protocol, several statements
            cur.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied.append(migration.version)
    return applied


__all__ = ["Migration", "available_migrations", "migrate"]
