"""The schemas of a rebuild on PostgreSQL: the rebuild's lock, its sibling schema made like the
live one, the positions and per-table digests of either, and the switch.

Generic over the read tables: every base table of the live schema is copied
(``CREATE TABLE … (LIKE … INCLUDING ALL)``) and digested, whichever projection added it, except
``tracking_positions`` (compared as positions, not as rows). A digest is the row count and the
md5 of every row's text, in order, over the columns the queries read (``BOOKKEEPING_COLUMNS``,
times of the fold itself, are left out: two folds of the same events differ only there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.records import Partition
from graph_ingest.projections.tables import REBUILD_LOCK_CLASS

TRACKING = "tracking_positions"
BOOKKEEPING_COLUMNS = frozenset({"folded_at"})
"""Columns that say when a fold ran, not what it folded: not compared."""

_LOCK = "SELECT pg_try_advisory_lock(%(class)s, hashtext(%(schema)s)) AS taken"
_HOLDER = """
SELECT l.pid, a.application_name, a.backend_start FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.classid = %(class)s::oid AND l.objid = hashtext(%(schema)s)::oid
  AND l.granted AND l.mode = 'ExclusiveLock'
"""
_TABLES = """
SELECT table_name FROM information_schema.tables
WHERE table_schema = %(schema)s AND table_type = 'BASE TABLE' ORDER BY table_name
"""
_COLUMNS = """
SELECT column_name FROM information_schema.columns
WHERE table_schema = %(schema)s AND table_name = %(table)s ORDER BY ordinal_position
"""
_DIGEST = (
    "SELECT count(*) AS rows, md5(coalesce(string_agg(r, E'\\n' ORDER BY r), '')) AS digest "
    "FROM (SELECT ROW({columns})::text AS r FROM {table}) AS t"
)
# A topic may feed several projections, each with its own positions: a partition is folded up to
# where every one of them is (the others fold a batch again, harmlessly: folds are order-free).
_POSITIONS = 'SELECT topic, partition, min("offset") AS "offset" FROM {} GROUP BY topic, partition'


class RebuildRefused(GraphIngestError):
    """The rebuild cannot go on (another runs, the live tables are behind, …): nothing changed."""

    code = StatusCode.FAILED_PRECONDITION


@dataclass(frozen=True, slots=True)
class TableDigest:
    rows: int
    digest: str


def lock_rebuild(conn: psycopg.Connection[Any], schema: str) -> None:
    """Take the rebuild's lock on ``schema`` for the session of ``conn`` (released when it
    closes, a killed rebuild's too), or refuse: another rebuild holds it."""
    params = {"class": REBUILD_LOCK_CLASS, "schema": schema}
    if conn.execute(_LOCK, params).fetchone() == (True,):
        return
    holders = conn.execute(_HOLDER, params).fetchall()
    who = ", ".join(
        f"pid {pid} ({app or 'no name'}, since {at:%H:%M:%S})" for pid, app, at in holders
    )
    raise RebuildRefused(
        f"another rebuild is building {schema} ({who or 'its session is ending'}): "
        "one rebuild at a time; wait for it, or stop it (running it again resumes it)"
    )


def tables_of(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    return [name for (name,) in conn.execute(_TABLES, {"schema": schema}).fetchall()]


def make_like(conn: psycopg.Connection[Any], live: str, rebuild: str) -> list[str]:
    """The rebuild schema with every table of ``live`` (those it has already are kept, with
    their rows: a resumed rebuild goes on from them); the live tables' names."""
    tables = tables_of(conn, live)
    if not tables:
        raise RebuildRefused(
            f"schema {live} has no read tables: run `graph-ingest db migrate` first"
        )
    with conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(rebuild)))
        for table in tables:
            conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} (LIKE {} INCLUDING ALL)").format(
                    sql.Identifier(rebuild, table), sql.Identifier(live, table)
                )
            )
    return tables


def drop_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def folded_positions(conn: psycopg.Connection[Any], schema: str) -> dict[Partition, int]:
    """The last offset of each partition that every projection of its topic has folded."""
    query = sql.SQL(_POSITIONS).format(sql.Identifier(schema, TRACKING))
    return {(topic, p): offset for topic, p, offset in conn.execute(query).fetchall()}


def digests(
    conn: psycopg.Connection[Any], schema: str, tables: Sequence[str]
) -> dict[str, TableDigest]:
    """Each of ``tables`` (but ``tracking_positions``) as a row count and a digest."""
    found = {}
    for table in tables:
        if table == TRACKING:
            continue
        names = conn.execute(_COLUMNS, {"schema": schema, "table": table}).fetchall()
        columns = sql.SQL(", ").join(
            sql.Identifier(name) for (name,) in names if name not in BOOKKEEPING_COLUMNS
        )
        query = sql.SQL(_DIGEST).format(columns=columns, table=sql.Identifier(schema, table))
        rows, digest = conn.execute(query).fetchone() or (0, "")
        found[table] = TableDigest(rows, digest)
    return found


def lock_live(
    conn: psycopg.Connection[Any], live: str, tables: Sequence[str], *, readers: bool
) -> None:
    """Stop every fold into ``live`` until the transaction ends; ``readers``: let reads go on
    (a comparison only), else they wait too (a switch, which drops the old tables, briefly).
    ``tracking_positions`` last: a fold writes it last, so a fold in flight finishes first."""
    ordered = sorted(tables, key=lambda table: (table == TRACKING, table))
    mode = sql.SQL("EXCLUSIVE" if readers else "ACCESS EXCLUSIVE")
    conn.execute("SET LOCAL lock_timeout = '30s'")
    for table in ordered:
        conn.execute(sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(live, table), mode))


def switch(conn: psycopg.Connection[Any], live: str, rebuild: str) -> None:
    """Within the caller's transaction: the rebuild becomes the live schema, the old one goes."""
    retired = f"{live}_retired"
    drop_schema(conn, retired)
    for old, new in ((live, retired), (rebuild, live)):
        conn.execute(
            sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new))
        )
    drop_schema(conn, retired)


__all__ = [
    "BOOKKEEPING_COLUMNS",
    "TRACKING",
    "RebuildRefused",
    "TableDigest",
    "digests",
    "drop_schema",
    "folded_positions",
    "lock_live",
    "lock_rebuild",
    "make_like",
    "switch",
    "tables_of",
]
