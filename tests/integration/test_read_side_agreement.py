"""The read side agrees with the write side (issue 18, the first test that must pass): after a
real run of every outcome (completed, no-op, conflict replanned, parked and released,
dead-lettered, replayed, purged), `status`, `ops list`, `doc show`, `errors report` and the HTTP
API say what the write tables say; after `projections rebuild` (which prints that every table
matches) every one of them answers exactly as before."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from graph_ingest.cli.main import cli
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.tables import read_schema
from graph_ingest.waiting import wait_until
from tests.integration.api_helpers import api_client, api_settings, ok
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_env, projector_settings, status_rows
from tests.integration.test_api import all_pages, without_age
from tests.integration.test_dlq_cli import dlq
from tests.integration.test_failure_routing import (
    BABBAGE,
    ROUTING,
    babbage,
    babbage_times_out,
    three_versions,
)
from tests.integration.test_projection_rebuild import rebuild_cli
from tests.integration.test_replan import DOC_V2, planned_as, submit, versions_planned_apart
from tests.samples import sample_plan
from tests.unit.planning_fakes import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# Long enough that a later version published once its leader has FAILED parks behind it before
# the leader runs out of retries, on a loaded machine.
RETRY_DELAYS_S = (2.0, 3.0, 4.0)


@dataclass
class Run:
    """What the run made: operation ids by the outcome they were made for, submission ids."""

    operations: dict[str, str]
    submissions: list[str]


def test_every_reader_agrees_with_the_write_side_and_a_rebuild_changes_no_answer(
    pipeline_factory: PipelineFactory,
) -> None:
    pipeline = pipeline_factory(retry_delays_s=RETRY_DELAYS_S, **ROUTING)
    since = datetime.now(UTC) - timedelta(minutes=1)
    run = mixed_outcomes(pipeline)
    until = datetime.now(UTC) + timedelta(minutes=1)
    settings = api_settings(pipeline)
    caught_up(pipeline)
    with api_client(settings) as client:
        readers = Readers(pipeline, client, since, until)
        before = readers.answers()
        agree_with_the_write_side(pipeline, run, before)
        # When the read tables are rebuilt from offset zero while the projector keeps running
        result, outcome = rebuild_cli(pipeline)
        # Then its comparison says every table matches, and it switched
        assert result.exit_code == 0, result.output
        assert outcome["switched"] and outcome["differing"] == [], outcome
        assert all(t["live"] == t["rebuilt"] for t in outcome["tables"]), outcome
        # and every reader answers exactly as before
        after = readers.answers()
    for reader, answer in before.items():
        assert after[reader] == answer, reader


def mixed_outcomes(pipeline: Pipeline) -> Run:
    """Every outcome once, on the real services: a real planner (it replans the CONFLICT), a
    real applier whose writes of Babbage time out until the replay, its relay, a projector."""
    first, second = versions_planned_apart(pipeline)
    op1, op2 = planned_as(pipeline, first), planned_as(pipeline, second)
    writer = babbage_times_out(pipeline)
    pipeline.start_applier(writer)
    pipeline.start_projector()
    # Given v1 of doc-x and w1 of doc-y failing (Babbage), a third one that never will apply
    v1, v2, _ = three_versions(pipeline)
    w1 = babbage(pipeline, "doc-y")
    w2 = sample_plan(
        "it",
        "doc-y",
        "Babbage, again.",
        [BABBAGE],
        [],
        previous=w1.next_state,
        graph=pipeline.graph,
    )
    dead = babbage(pipeline, "doc-dead")
    pipeline.publish(v1, w1, dead)
    for leader in (v1, w1):
        pipeline.wait_stage(leader.operation_id, Stage.FAILED)
    # and their next versions parked behind them, following them to the DLQ
    pipeline.publish(v2, w2)
    for plan in (v1, v2, w1, w2, dead):
        pipeline.wait_stage(plan.operation_id, Stage.DEAD_LETTERED, timeout_s=120)
    # The two versions of the planned document: the first completes, the second conflicts and
    # is replanned; the same content again is a NO_OP
    pipeline.wait_stage(op1, Stage.COMPLETED)
    pipeline.wait_stage(op2, Stage.CONFLICT)
    op3 = wait_until(lambda: replanned(pipeline, second, op2), timeout_s=90, what="a replan")
    pipeline.wait_stage(op3, Stage.COMPLETED)
    # (a new source time: the same request again would be the same submission)
    again = request("doc", DOC_V2, document_version="2", source_updated_at=datetime.now(UTC))
    (third,) = submit(pipeline, again)
    no_op = planned_as(pipeline, third)
    pipeline.wait_stage(no_op, Stage.COMPLETED)
    # When Babbage can be written: v1 replayed (v2 released behind it), w1 purged (forced)
    writer.culprits.clear()
    entries = {e.operation_id: e.dlq_id for e in pipeline.dlq_entries(5)}
    replayed = dlq(pipeline, "replay", entries[v1.operation_id], "--reason", "Babbage is back")
    assert replayed.exit_code == 0, replayed.output
    purged = dlq(
        pipeline, "purge", entries[w1.operation_id], "--reason", "wrong document", "--force"
    )
    assert purged.exit_code == 0, purged.output
    for plan in (v1, v2):
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    pipeline.wait_stage(w2.operation_id, Stage.CONFLICT)
    written = pipeline.store.get_operation(v2.operation_id)
    assert written is not None and Stage.PARKED in written.stage_times
    made = {"replayed": v1, "released": v2, "dead": dead, "purged": w1, "stranded": w2}
    return Run(
        operations={
            "completed": op1,
            "conflicted": op2,
            "replan": op3,
            "no_op": no_op,
            **{name: plan.operation_id for name, plan in made.items()},
        },
        submissions=[first, second, third],
    )


def replanned(pipeline: Pipeline, submission_id: str, conflicted: str) -> str | None:
    submission = pipeline.store.get_submission(submission_id)
    return submission.operation_id if submission and submission.operation_id != conflicted else None


def write_side(pipeline: Pipeline) -> dict[str, tuple[str, int, int]]:
    """Every operation of the write side: (stage, sequence, attempts)."""
    rows = pipeline.sql("SELECT operation_id, stage, sequence, attempts FROM operations")
    return {op: (stage, sequence, attempts) for op, stage, sequence, attempts in rows}


def caught_up(pipeline: Pipeline) -> None:
    """Wait until the projector has folded every operation and DLQ entry as the write side
    holds it."""
    read_dlq = f'"{read_schema(pipeline.settings.postgres)}".dlq_entries'

    def folded() -> bool:
        rows = status_rows(projector_settings(pipeline))
        read = {r["operation_id"]: (r["stage"], r["sequence"], r["attempts"]) for r in rows}
        entries = pipeline.sql("SELECT dlq_id, status FROM dlq_entries")
        return read == write_side(pipeline) and sorted(entries) == sorted(
            pipeline.sql(f"SELECT dlq_id, status FROM {read_dlq}")
        )

    wait_until(folded, timeout_s=90, what="the projection to catch up with the write side")


class Readers:
    """Every reader of the read side, asked everything about the run: one comparable value."""

    def __init__(
        self, pipeline: Pipeline, client: TestClient, since: datetime, until: datetime
    ) -> None:
        self.pipeline = pipeline
        self.client = client
        self.runner = CliRunner(env=projector_env(pipeline))
        self.since, self.until = since.isoformat(), until.isoformat()

    def cli(self, *args: str) -> Any:
        result = self.runner.invoke(cli, [*args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def ops_list(self, *filters: str) -> list[dict[str, Any]]:
        """Every operation `ops list` shows, three a page."""
        listed: list[dict[str, Any]] = []
        cursor: list[str] = []
        while True:
            page = self.cli("ops", "list", "--limit", "3", *filters, *cursor)
            listed += page["operations"]
            if page["next_cursor"] is None:
                return listed
            cursor = ["--cursor", page["next_cursor"]]

    def answers(self) -> dict[str, Any]:
        operations = sorted(write_side(self.pipeline))
        submissions = [
            s for (s,) in self.pipeline.sql("SELECT submission_id FROM ingest_submissions")
        ]
        documents = self.pipeline.sql("SELECT DISTINCT space, document_id FROM operations")
        return {
            "status": {op: self.cli("status", op) for op in operations},
            "status of submissions": {s: self.cli("status", s) for s in sorted(submissions)},
            "ops list": self.ops_list(),
            "ops list by stage": {
                stage.value: self.ops_list("--stage", stage.value) for stage in Stage
            },
            "doc show": {
                f"{space}/{doc}": self.cli("doc", "show", space, doc)
                for space, doc in sorted(documents)
            },
            "errors report": self.cli("errors", "report", "--from", self.since, "--to", self.until),
            **self.api(operations, documents),
        }

    def api(self, operations: list[str], documents: list[tuple[str, str]]) -> dict[str, Any]:
        client = self.client
        stats = ok(client, "/api/v1/dlq/stats")
        return {
            "GET operation": {op: ok(client, f"/api/v1/operations/{op}") for op in operations},
            "GET document": {
                f"{space}/{doc}": ok(client, f"/api/v1/documents/{space}/{doc}")
                for space, doc in sorted(documents)
            },
            "GET errors report": ok(
                client, "/api/v1/errors/report", **{"from": self.since, "to": self.until}
            ),
            "GET operations": all_pages(client, "/api/v1/operations", "operations"),
            "GET dlq messages": [
                without_age(e) for e in all_pages(client, "/api/v1/dlq/messages", "entries")
            ],
            "GET dlq stats": {k: v for k, v in stats.items() if k != "oldest_pending_age_s"},
            "GET projections": [
                (lag["projection"], lag["offsets_behind"], lag["state"])
                for lag in ok(client, "/api/v1/projections")
            ],
        }


def agree_with_the_write_side(pipeline: Pipeline, run: Run, answers: dict[str, Any]) -> None:
    written = written_operations(pipeline)
    outcomes = {name: written[op].stage.value for name, op in run.operations.items()}
    assert outcomes == {
        "completed": "COMPLETED", "conflicted": "CONFLICT", "replan": "COMPLETED",
        "no_op": "COMPLETED", "replayed": "COMPLETED", "released": "COMPLETED",
        "dead": "DEAD_LETTERED", "purged": "DEAD_LETTERED", "stranded": "CONFLICT",
    }  # fmt: skip
    assert written[run.operations["no_op"]].plan_kind is PlanKind.NO_OP
    agree_on_operations(written, answers)
    # a submission: its operation now; the replanned one, its whole path
    for submission_id, shown in answers["status of submissions"].items():
        submission = pipeline.store.get_submission(submission_id)
        assert submission is not None and shown["operation_id"] == submission.operation_id
    path = answers["status of submissions"][run.submissions[1]]["path"]
    assert [(step["operation_id"], step["stage"]) for step in path] == [
        (run.operations["conflicted"], "CONFLICT"),
        (run.operations["replan"], "COMPLETED"),
    ]
    agree_on_documents(pipeline, answers["doc show"])
    agree_on_the_dlq(pipeline, answers)
    agree_on_errors(pipeline, answers["errors report"])
    # the API answers documents and the errors report with the CLI's very JSON
    assert answers["GET document"] == answers["doc show"]
    assert answers["GET errors report"] == answers["errors report"]
    assert answers["GET projections"] == [("operation_status", 0, "idle")]


def written_operations(pipeline: Pipeline) -> dict[str, Operation]:
    written = {op: pipeline.store.get_operation(op) for op in write_side(pipeline)}
    return {op: operation for op, operation in written.items() if operation is not None}


def agree_on_operations(written: dict[str, Operation], answers: dict[str, Any]) -> None:
    """`status` and the API show each operation's stage, sequence, attempts, plan kind and DLQ
    entry; `ops list` and the API's listing every operation once; by stage, the write side's."""
    for op, operation in written.items():
        expected = (
            operation.stage.value,
            operation.sequence,
            operation.attempts,
            operation.plan_kind.value if operation.plan_kind else None,
            operation.dlq_id,
        )
        for shown in (answers["status"][op], answers["GET operation"][op]):
            found = tuple(
                shown[k] for k in ("stage", "sequence", "attempts", "plan_kind", "dlq_id")
            )
            assert found == expected, op
    for listing in (answers["ops list"], answers["GET operations"]):
        assert sorted(o["operation_id"] for o in listing) == sorted(written)
    for stage, listed in answers["ops list by stage"].items():
        in_stage = {op for op, o in written.items() if o.stage.value == stage}
        assert {o["operation_id"] for o in listed} == in_stage, stage


def agree_on_documents(pipeline: Pipeline, shown: dict[str, Any]) -> None:
    """Each document's revision and version are the write side's (none committed: revision 0,
    no version), and it lists the write side's operations of it."""
    states = {
        f"{space}/{doc}": (revision, version)
        for space, doc, revision, version in pipeline.sql(
            "SELECT space, document_id, revision, document_version FROM document_states"
        )
    }
    operations: dict[str, set[str]] = {}
    for space, doc, op in pipeline.sql("SELECT space, document_id, operation_id FROM operations"):
        operations.setdefault(f"{space}/{doc}", set()).add(op)
    assert set(shown) == set(operations)
    for document, view in shown.items():
        shown_state = (view["revision"], view["document_version"])
        assert shown_state == states.get(document, (0, None)), document
        assert {o["operation_id"] for o in view["operations"]} == operations[document], document


def agree_on_the_dlq(pipeline: Pipeline, answers: dict[str, Any]) -> None:
    entries = dict(pipeline.sql("SELECT dlq_id, status FROM dlq_entries"))
    listed = answers["GET dlq messages"]
    assert {e["dlq_id"]: e["status"] for e in listed} == entries
    assert len(listed) == len(entries)
    by_status = {status: count for status, count in Counter(entries.values()).items()}
    assert answers["GET dlq stats"]["by_status"] == by_status


def agree_on_errors(pipeline: Pipeline, report: dict[str, Any]) -> None:
    """The report counts per code and class what the write side recorded as failures: its
    failure records (each failed attempt and dead-lettering) and its conflicts."""
    recorded = Counter(
        (code, error_class)
        for code, error_class in pipeline.sql(
            "SELECT detail->>'code', detail->>'error_class' FROM failure_attempts"
            " UNION ALL SELECT last_error_code, last_error_class FROM operations"
            " WHERE stage = 'CONFLICT'"
        )
    )
    counted = Counter({(g["code"], g["error_class"]): g["failures"] for g in report["groups"]})
    assert counted == recorded, json.dumps(report["groups"], indent=1)
