"""`graph-ingest projections rebuild`: fresh read tables folded from offset zero while the live
ones keep serving, compared with them, and switched in only when they have caught up and match.

1. **One at a time**: the rebuild holds a session advisory lock on its schema for its whole run
   (``rebuild_schema.lock_rebuild``); a second rebuild, or a projector pointed at those tables,
   is refused. A killed rebuild's lock goes with its connection.
2. **Build beside**: ``<read schema>_rebuild`` gets every live table, made ``LIKE`` it (tables a
   colleague's projection adds are copied too), and the projector's topics
   (``projector.projected_topics``) are folded into it from offset zero up to the end offsets
   taken at the start, by the projector's own fold. Its own ``tracking_positions`` say how far
   it got: stopped and run again, it goes on from there.
3. **Catch up**: the live projector moves on meanwhile; the rebuild waits (``wait_live_s``) until
   the live tables are at least where it is, then folds on to exactly their positions.
4. **Compare and switch**: in one transaction the live tables are locked (folds wait for it;
   readers too, briefly, unless this is a dry run), their positions checked equal to the rebuild's (else the live projector
   moved again: back to 3), every table's row count and digest compared, and, when all match and
   this is no dry run, the schemas renamed: live -> retired, rebuild -> live, retired dropped.
   A dry run, or a mismatch, leaves the live tables and keeps the rebuild's (run it again to
   continue from them, or ``--discard`` them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from graph_ingest.kafka.records import Partition
from graph_ingest.projections.projector import projected_topics
from graph_ingest.projections.rebuild_reader import Progress, end_offsets, fold_range
from graph_ingest.projections.rebuild_schema import (
    RebuildRefused,
    TableDigest,
    digests,
    drop_schema,
    folded_positions,
    lock_live,
    lock_rebuild,
    make_like,
    switch,
    tables_of,
)
from graph_ingest.projections.tables import ReadTables, read_schema, rebuild_schema
from graph_ingest.settings import Settings
from graph_ingest.store.errors import StoreError
from graph_ingest.store.postgres.translate import translating

CATCH_UP_ROUNDS = 10
"""How often the live projector may move between a catch-up and the switch before giving up."""


@dataclass(frozen=True, slots=True)
class TableComparison:
    table: str
    live: TableDigest | None
    rebuilt: TableDigest | None
    """None: the table is missing on that side."""

    @property
    def same(self) -> bool:
        return self.live is not None and self.live == self.rebuilt


@dataclass(frozen=True, slots=True)
class RebuildOutcome:
    live_schema: str
    rebuild_schema: str
    folded: int
    """Messages folded by this run (a resumed run: since it resumed)."""
    completed: bool
    """False: stopped before the comparison (run it again to go on)."""
    partitions: int = 0
    """Partitions at the same position in both, when compared."""
    tables: tuple[TableComparison, ...] = ()
    switched: bool = False

    @property
    def differing(self) -> list[str]:
        return [comparison.table for comparison in self.tables if not comparison.same]


def compare(
    live: Mapping[str, TableDigest], rebuilt: Mapping[str, TableDigest]
) -> tuple[TableComparison, ...]:
    """Each table of either side, by name, with both digests."""
    return tuple(
        TableComparison(table, live.get(table), rebuilt.get(table))
        for table in sorted(live.keys() | rebuilt.keys())
    )


class Rebuild:
    """One run of the rebuild (see the module); ``run`` does it."""

    def __init__(
        self,
        settings: Settings,
        *,
        dry_run: bool = False,
        wait_live_s: float = 60,
        progress: Progress = lambda _folded: None,
    ) -> None:
        self._settings = settings
        self._dry_run = dry_run
        self._wait_live_s = wait_live_s
        self._progress = progress
        self.live = read_schema(settings.postgres)
        self.schema = rebuild_schema(settings.postgres)
        self._folded = 0

    def run(self, stop: threading.Event) -> RebuildOutcome:
        with self._locked() as conn, self._rebuild_tables() as tables:
            make_like(conn, self.live, self.schema)
            target = end_offsets(self._settings, projected_topics(self._settings))
            if not self._fold_to(conn, tables, target, stop):
                return self._interrupted()
            for _ in range(CATCH_UP_ROUNDS):
                live_at = self._wait_for_live(conn, stop)
                if live_at is None:
                    return self._interrupted()
                end = {partition: offset + 1 for partition, offset in live_at.items()}
                if not self._fold_to(conn, tables, end, stop):
                    return self._interrupted()
                try:
                    outcome = self._compare_and_switch(conn)
                except StoreError as exc:
                    if not exc.code.is_transient:  # a deadlock or lock timeout: again
                        raise
                    continue
                if outcome is not None:
                    return outcome
        raise RebuildRefused(
            f"the live projection moved on {CATCH_UP_ROUNDS} times between catching up and "
            "switching: run the rebuild again when the pipeline is quieter"
        )

    def discard(self) -> None:
        """Drop the rebuild's tables (under its lock: not while a rebuild runs)."""
        with self._locked() as conn:
            drop_schema(conn, self.schema)

    @contextmanager
    def _locked(self) -> Iterator[psycopg.Connection[Any]]:
        with (
            translating(),
            psycopg.connect(self._settings.postgres.conninfo(), autocommit=True) as conn,
        ):
            conn.execute("SET application_name = 'graph-ingest projections rebuild'")
            lock_rebuild(conn, self.schema)
            yield conn

    @contextmanager
    def _rebuild_tables(self) -> Iterator[ReadTables]:
        tables = ReadTables(self._settings.postgres, schema=self.schema)
        tables.start()
        try:
            yield tables
        finally:
            tables.close()

    def _fold_to(
        self,
        conn: psycopg.Connection[Any],
        tables: ReadTables,
        end: Mapping[Partition, int],
        stop: threading.Event,
    ) -> bool:
        start = {
            partition: offset + 1
            for partition, offset in folded_positions(conn, self.schema).items()
        }
        return fold_range(self._settings, tables, start, end, stop, self._count)

    def _count(self, folded: int) -> None:
        self._folded += folded
        self._progress(folded)

    def _wait_for_live(
        self, conn: psycopg.Connection[Any], stop: threading.Event
    ) -> dict[Partition, int] | None:
        """The live positions, once none is behind the rebuild's (the live projector folds
        on); None when ``stop`` came first."""
        deadline = time.monotonic() + self._wait_live_s
        while True:
            live = folded_positions(conn, self.live)
            ahead = sorted(
                partition
                for partition, offset in folded_positions(conn, self.schema).items()
                if live.get(partition, -1) < offset
            )
            if not ahead:
                return live
            if stop.is_set():
                return None
            if time.monotonic() >= deadline:
                where = ", ".join(f"{topic}[{partition}]" for topic, partition in ahead)
                raise RebuildRefused(
                    f"the live projection is behind the rebuild at {where} after "
                    f"{self._wait_live_s:.0f} s: is `graph-ingest worker projector` running? "
                    "The rebuild compares only at equal positions; run it again to go on"
                )
            stop.wait(0.5)

    def _compare_and_switch(self, conn: psycopg.Connection[Any]) -> RebuildOutcome | None:
        """Compare both at equal positions and switch when they match (and this is no dry
        run); None when the live projector moved meanwhile."""
        with conn.transaction():
            live_tables = tables_of(conn, self.live)
            lock_live(conn, self.live, live_tables, readers=self._dry_run)
            positions = folded_positions(conn, self.live)
            if positions != folded_positions(conn, self.schema):
                return None
            tables = compare(
                digests(conn, self.live, live_tables),
                digests(conn, self.schema, tables_of(conn, self.schema)),
            )
            switched = not self._dry_run and all(table.same for table in tables)
            if switched:
                switch(conn, self.live, self.schema)
        return RebuildOutcome(
            self.live,
            self.schema,
            self._folded,
            completed=True,
            partitions=len(positions),
            tables=tables,
            switched=switched,
        )

    def _interrupted(self) -> RebuildOutcome:
        return RebuildOutcome(self.live, self.schema, self._folded, completed=False)


__all__ = [
    "CATCH_UP_ROUNDS",
    "Rebuild",
    "RebuildOutcome",
    "RebuildRefused",
    "TableComparison",
    "compare",
]
