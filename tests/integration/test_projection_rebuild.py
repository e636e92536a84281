"""`graph-ingest projections rebuild` on real Kafka and PostgreSQL: after a real pipeline run the
rebuilt tables answer the same and are switched in while the projector runs; a dry run and a
mismatch leave the live tables; a stopped rebuild resumes; a second rebuild, and a projector on
the rebuild's tables, are refused."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from graph_ingest.cli.main import cli
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.hooks import Hooks
from graph_ingest.projections.projector import Projector
from graph_ingest.projections.queries import OperationQueries
from graph_ingest.projections.rebuild import Rebuild, RebuildOutcome
from graph_ingest.projections.tables import ReadTables, read_schema, rebuild_schema
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.integration.projection_helpers import (
    BABBAGE,
    alice_plans,
    opened_read_tables,
    projector_env,
    projector_settings,
    sent_and_folded,
    status_rows,
    summary,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def rebuilt(pipeline: Pipeline) -> Iterator[Pipeline]:
    """``pipeline``, its rebuild schema dropped at the end too."""
    yield pipeline
    with psycopg.connect(pipeline.settings.postgres.conninfo(), autocommit=True) as conn:
        conn.execute(
            f'DROP SCHEMA IF EXISTS "{rebuild_schema(pipeline.settings.postgres)}" CASCADE'
        )


def rebuild_cli(pipeline: Pipeline, *args: str) -> tuple[Result, dict[str, Any]]:
    result = CliRunner(env=projector_env(pipeline)).invoke(
        cli, ["projections", "rebuild", "--json", "--wait-live", "20", *args]
    )
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def projections_status(pipeline: Pipeline) -> list[dict[str, Any]]:
    result = CliRunner(env=projector_env(pipeline)).invoke(cli, ["projections", "status", "--json"])
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout))


def answers(pipeline: Pipeline, tables: ReadTables, operation_ids: list[str]) -> tuple[Any, ...]:
    """What the read service says: each operation, and the whole listing page by page."""
    queries = OperationQueries(tables, committed=pipeline.store)
    pages, cursor = [], None
    while True:
        page = queries.list_operations(limit=3, cursor=cursor)
        pages.append(page.operations)
        if (cursor := page.next_cursor) is None:
            break
    return tuple(queries.operation_status(op) for op in operation_ids), tuple(pages)


def table_oid(settings: Settings) -> int:
    """The live operation_status table's identity: it changes only when a switch replaces it."""
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        name = f'"{read_schema(settings.postgres)}".operation_status'
        row = conn.execute("SELECT %s::regclass::oid", [name]).fetchone()
        assert row is not None
        return int(row[0])


def test_a_rebuild_after_a_real_run_answers_the_same_and_switches_while_the_projector_runs(
    rebuilt: Pipeline,
) -> None:
    # Given a real applier's run (completed and dead-lettered) folded by a running projector
    settings = projector_settings(rebuilt)
    stop = threading.Event()
    projector = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    rebuilt.start_applier(
        FailingWriter(rebuilt.settings, StatusCode.DEADLINE_EXCEEDED, [BABBAGE.node_id("it")])
    )
    projector.start()
    try:
        plans = alice_plans(rebuilt, 5)
        rebuilt.publish(*plans)
        rebuilt.wait_stage(plans[0].operation_id, Stage.DEAD_LETTERED, timeout_s=120)
        for plan in plans[1:]:
            rebuilt.wait_stage(plan.operation_id, Stage.COMPLETED)
        write_side = {
            op: (stage, sequence, attempts)
            for op, stage, sequence, attempts in rebuilt.sql(
                "SELECT operation_id, stage, sequence, attempts FROM operations"
            )
        }
        wait_until(
            lambda: summary(status_rows(settings)) == write_side,
            timeout_s=90,
            what="the read table to agree with the write side",
        )
        ids = sorted(write_side)
        with opened_read_tables(settings) as tables:
            before = answers(rebuilt, tables, ids)
        old_table = table_oid(settings)
        # When the tables are rebuilt while the projector keeps running
        result, outcome = rebuild_cli(rebuilt)
        # Then the comparison says every table matches, and the rebuilt tables are live
        assert result.exit_code == 0, result.output
        assert outcome["switched"] and outcome["differing"] == []
        [status] = [t for t in outcome["tables"] if t["table"] == "operation_status"]
        assert status["live"] == status["rebuilt"] and status["live"]["rows"] == len(ids)
        assert table_oid(settings) != old_table
        # and the read service answers exactly as before
        with opened_read_tables(settings) as tables:
            assert answers(rebuilt, tables, ids) == before
        assert projector.is_alive()
    finally:
        stop.set()
        projector.join(timeout=60)
    assert not projector.is_alive()


def test_a_dry_run_and_a_mismatch_leave_the_live_tables(rebuilt: Pipeline) -> None:
    # Given events folded by a projector
    settings = projector_settings(rebuilt)
    sent_and_folded(settings, 6)
    live_table = table_oid(settings)
    # When a dry run compares
    result, outcome = rebuild_cli(rebuilt, "--dry-run")
    # Then every table matches, and the live tables are left as they were
    assert result.exit_code == 0, result.output
    assert (outcome["switched"], outcome["differing"]) == (False, [])
    assert table_oid(settings) == live_table
    # When a row of the rebuild's tables is tampered with, and the rebuild is run for real
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        schema = rebuild_schema(settings.postgres)
        conn.execute(
            f"UPDATE \"{schema}\".operation_status SET attempts = 99 WHERE operation_id = 'op-1'"
        )
    result, outcome = rebuild_cli(rebuilt)
    # Then the comparison names the table that differs and refuses to switch
    assert result.exit_code == 1, result.output
    assert (outcome["switched"], outcome["differing"]) == (False, ["operation_status"])
    assert table_oid(settings) == live_table
    # and --discard drops the rebuild's tables
    discarded = CliRunner(env=projector_env(rebuilt)).invoke(
        cli, ["projections", "rebuild", "--discard"]
    )
    assert discarded.exit_code == 0, discarded.output
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]
        ).fetchone()
        assert found == (0,)


class PausedRebuild:
    """A rebuild on a thread reading 5 messages at a time, paused after its first batch until
    ``finish`` lets it go on (or stops it)."""

    def __init__(self, settings: Settings) -> None:
        small = settings.projector.model_copy(update={"batch_max_events": 5})
        self.rebuild = Rebuild(
            settings.model_copy(update={"projector": small}), progress=self._after_a_batch
        )
        self.first_batch: list[int] = []
        self._progressed, self._go_on, self._stop = (threading.Event() for _ in range(3))
        self._outcome: list[RebuildOutcome | Exception] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._outcome.append(self.rebuild.run(self._stop))
        except Exception as exc:  # raised again by finish, on the test's thread
            self._outcome.append(exc)

    def _after_a_batch(self, folded: int) -> None:
        if not self.first_batch:
            self.first_batch.append(folded)
            self._progressed.set()
            self._go_on.wait(120)

    def start(self) -> None:
        self._thread.start()
        assert self._progressed.wait(120), "the rebuild folded nothing"

    def finish(self, *, stop: bool) -> RebuildOutcome:
        if stop:
            self._stop.set()
        self._go_on.set()
        self._thread.join(timeout=120)
        [outcome] = self._outcome
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_a_stopped_rebuild_resumes_and_refuses_a_second_one_meanwhile(rebuilt: Pipeline) -> None:
    # Given 30-odd events folded by a projector, and a rebuild paused after its first batch
    settings = projector_settings(rebuilt)
    sent = sent_and_folded(settings, 12)
    first = PausedRebuild(settings)
    first.start()
    try:
        # Then `projections status` shows it rebuilding, with the offsets done and to do
        live, rebuilding = projections_status(rebuilt)
        assert (live["state"], rebuilding["state"]) == ("idle", "rebuilding")
        done = first.first_batch[0]
        assert rebuilding["progress"] == {"done": done, "to_do": sent - done}
        # Then a second rebuild is refused while it runs
        result, refused = rebuild_cli(rebuilt)
        assert result.exit_code == 5, result.output
        assert "another rebuild" in refused["error"]["message"]
        # and so is a projector on the rebuild's tables
        tables = ReadTables(settings.postgres, schema=first.rebuild.schema)
        tables.start()
        try:
            with pytest.raises(GraphIngestError, match="being rebuilt"):
                Projector(settings, tables, hooks=Hooks("it")).run(threading.Event())
        finally:
            tables.close()
    finally:
        # When it is stopped midway
        stopped = first.finish(stop=True)
    assert not stopped.completed and stopped.folded > 0
    # Then run again, it goes on from where it stopped, matches and switches
    result, resumed = rebuild_cli(rebuilt)
    assert result.exit_code == 0, result.output
    assert resumed["switched"] and resumed["differing"] == []
    # having folded each message once across both runs; the status shows no rebuild any more
    assert stopped.folded + resumed["folded"] == sent
    assert [lag["state"] for lag in projections_status(rebuilt)] == ["idle"]


def test_a_rebuild_catches_up_with_what_the_live_projector_folded_meanwhile(
    rebuilt: Pipeline,
) -> None:
    # Given a rebuild that took the topic's end offsets, then paused
    settings = projector_settings(rebuilt)
    sent = sent_and_folded(settings, 6)
    paused = PausedRebuild(settings)
    paused.start()
    try:
        # When more events arrive and the live projector folds them meanwhile
        sent += sent_and_folded(settings, 9)
    finally:
        outcome = paused.finish(stop=False)
    # Then the rebuild folds on past the offsets it took, to the live positions, and switches
    assert outcome.switched and outcome.differing == []
    assert outcome.folded == sent
    [status] = [t for t in outcome.tables if t.table == "operation_status"]
    assert status.rebuilt is not None and status.rebuilt.rows == 9
