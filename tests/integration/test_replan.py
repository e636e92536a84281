"""A CONFLICT replans the newest request of its document, at most PLANNER__MAX_REPLANS times, on
the real services: the planner worker reads the CONFLICT from the operations topic, submits the
request again, plans it on the committed state; past the bound a planning DLQ entry."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.planner import Planner
from graph_ingest.planning.request_planner import PlannedRequest
from graph_ingest.planning.rules import RulesExtractor
from graph_ingest.producers.follow import follow
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.settings.planner import PlannerSettings
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery
from graph_ingest.store.submissions import ReplanOutcome
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.unit.planning_fakes import example_schema, request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DOC_V1 = (
    "Bob is a member of the Payments Team.\n\n"
    "The Payments Team owns the Ledger Service. The Ledger Service depends on the Billing API."
)
DOC_V2 = "Bob is a member of the Payments Team. The Ledger Service depends on the Billing API."


class LaggingView:
    """The real store as the planner's view, except that the committed state of the documents in
    ``lagging`` is read one revision behind (a planner that keeps planning on a stale state)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._store = pipeline.store
        self.lagging: set[tuple[str, str]] = set()

    def get_document_state(self, space: str, document_id: str) -> DocumentState | None:
        if (space, document_id) not in self.lagging:
            return self._store.get_document_state(space, document_id)
        history = self._store.document_history(space, document_id)
        return history[-2] if len(history) > 1 else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class ForgetfulPlanner:
    """The real planner, forgetting what it planned before each request: what a planner that has
    just taken the partition over knows (only the committed state)."""

    def __init__(self, pipeline: Pipeline, view: Any = None) -> None:
        schema = example_schema()
        self.inner = Planner(
            schema,
            {"rules": RulesExtractor(schema)},
            view or pipeline.store,
            PlannerSettings(),
            graph=pipeline.graph,
        )

    def start(self) -> None:
        self.inner.start()

    def close(self) -> None:
        self.inner.close()

    def plan_request(self, request: IngestRequest) -> PlannedRequest:
        self.inner.forget([(request.space, request.document_id)])
        return self.inner.plan_request(request)

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        self.inner.forget(keys)


def submit(pipeline: Pipeline, *requests: IngestRequest) -> list[str]:
    with IngestProducer(pipeline.settings) as producer:
        return [producer.submit(r) for r in requests]


def planned_as(pipeline: Pipeline, submission_id: str) -> str:
    def planned() -> str | None:
        submission = pipeline.store.get_submission(submission_id)
        return submission.operation_id if submission else None

    return wait_until(planned, timeout_s=60, what=f"{submission_id} to be planned")


def status(pipeline: Pipeline, operation_id: str, *args: str) -> str:
    result = CliRunner(env=pipeline.env()).invoke(
        cli, ["status", operation_id, "--wait", "60s", *args]
    )
    assert result.exit_code == 0, result.output
    return result.output


def versions_planned_apart(pipeline: Pipeline) -> tuple[str, str]:
    """Start a relay and a forgetful planner; submit two versions of "doc", which it plans both
    on the committed state (none). Their submission ids."""
    pipeline.start_relay()
    pipeline.start_planner(ForgetfulPlanner(pipeline))
    first, second = submit(
        pipeline,
        request("doc", DOC_V1, document_version="1"),
        request("doc", DOC_V2, document_version="2"),
    )
    return first, second


def test_a_version_planned_on_a_stale_state_conflicts_and_is_replanned_on_the_committed_one(
    pipeline: Pipeline,
) -> None:
    # Given two versions of a document both planned on the committed state (none): the second
    # does not build on the first, as after a rebalance between planners
    first, second = versions_planned_apart(pipeline)
    op1, op2 = planned_as(pipeline, first), planned_as(pipeline, second)

    # When they apply: the first wins, the second meets a CONFLICT
    pipeline.start_applier()
    pipeline.start_projector()
    pipeline.wait_stage(op1, Stage.COMPLETED)
    pipeline.wait_stage(op2, Stage.CONFLICT)

    # Then the newest request is planned again, on revision 1, and applies as revision 2
    def replanned() -> str | None:
        now = pipeline.store.get_submission(second)
        return now.operation_id if now and now.operation_id != op2 else None

    op3 = wait_until(replanned, timeout_s=60, what="the second version to be replanned")
    pipeline.wait_stage(op3, Stage.COMPLETED)
    state = pipeline.store.get_document_state("kb", "doc")
    assert state is not None
    assert (state.revision, state.operation_id) == (2, op3)
    assert (state.document_version, state.content_hash) == ("2", content_hash(DOC_V2))
    # the graph is the second version's: the edge it dropped is gone
    nodes, edges = pipeline.graph_elements()
    assert edges == set(state.edge_keys) and len(edges) == 2
    assert nodes == set(state.node_ids)

    # exactly one replan was planned and published, marked as such
    published = read_to_end(pipeline.settings, pipeline.settings.topics.plans)
    assert sorted(decode_plan(v).operation_id for _, v, _ in published) == sorted([op1, op2, op3])
    replan = pipeline.store.get_replan(op2)
    assert replan is not None
    assert (replan.outcome, replan.attempt, replan.replanned_as) == (
        ReplanOutcome.REPLANNED,
        1,
        op3,
    )
    requests = read_to_end(pipeline.settings, pipeline.settings.topics.requests)
    resubmitted = [h for _, _, h in requests if kafka_headers.REPLAN_OF in h]
    assert len(resubmitted) == 1
    assert resubmitted[0][kafka_headers.REPLAN_OF] == op2.encode()
    assert resubmitted[0][kafka_headers.REPLAN_ATTEMPT] == b"1"
    assert resubmitted[0][kafka_headers.SUBMISSION_ID] == second.encode()

    # and status says so, of the conflicted operation and of the submission
    assert f"replanned   as {op3} (replan 1 of at most 3)" in status(pipeline, op2)
    followed = status(pipeline, second)
    assert f"operation   {op3}" in followed and f"replan of   {op2}" in followed
    # the submission's whole path: the conflicted operation, then its replan
    assert f"path        {op2} CONFLICT -> {op3} COMPLETED" in followed
    path = json.loads(status(pipeline, second, "--json"))["path"]
    assert [(step["operation_id"], step["stage"]) for step in path] == [
        (op2, "CONFLICT"),
        (op3, "COMPLETED"),
    ]


def test_a_request_that_keeps_conflicting_ends_in_the_dlq_after_max_replans(
    pipeline: Pipeline,
) -> None:
    settings = pipeline.settings.model_copy(
        update={"planner": pipeline.settings.planner.model_copy(update={"max_replans": 2})}
    )
    view = LaggingView(pipeline)
    pipeline.start_relay()
    pipeline.start_applier()
    pipeline.start_projector()
    pipeline.start_planner(ForgetfulPlanner(pipeline, view), settings)
    (first,) = submit(pipeline, request("doc", DOC_V1, document_version="1"))
    pipeline.wait_stage(planned_as(pipeline, first), Stage.COMPLETED)

    # Given a planner that reads the document's committed state one revision behind, and a
    # version whose producer named its operation
    view.lagging.add(("kb", "doc"))
    (second,) = submit(
        pipeline, request("doc", DOC_V2, document_version="2", operation_id="op-doc-2")
    )
    assert second == "op-doc-2"  # the submission id is the operation id it names

    # Then it conflicts, is replanned twice (as derived operation ids), conflicts each time, and
    # becomes a planning DLQ entry
    (entry,) = pipeline.dlq_entries(1, timeout_s=120)
    assert (entry.original_topic, entry.document_id) == (settings.topics.requests, "doc")
    assert entry.code is StatusCode.ABORTED and entry.error_class == "ReplansExhausted"
    assert "after 2 replan(s)" in entry.message
    chain = ["op-doc-2", "op-doc-2~replan1", "op-doc-2~replan2"]
    for operation_id in chain:
        pipeline.wait_stage(operation_id, Stage.CONFLICT)
    replans = [pipeline.store.get_replan(op) for op in chain]
    assert [(r.outcome, r.attempt, r.replanned_as) for r in replans if r] == [
        (ReplanOutcome.REPLANNED, 1, chain[1]),
        (ReplanOutcome.REPLANNED, 2, chain[2]),
        (ReplanOutcome.DEAD_LETTERED, 3, None),
    ]
    assert replans[2] is not None and replans[2].dlq_id == entry.dlq_id
    state = pipeline.store.get_document_state("kb", "doc")
    assert state is not None and state.revision == 1
    assert f"DLQ entry {entry.dlq_id}" in status(pipeline, chain[2])


# -- planning DLQ entries replayed -------------------------------------------------------------


class UpgradablePlanner(ForgetfulPlanner):
    """The real planner, replaced by one on a newer graph schema when ``upgrade`` is called."""

    def upgrade(self, pipeline: Pipeline, version: str) -> None:
        schema = example_schema(version)
        self.inner = Planner(
            schema,
            {"rules": RulesExtractor(schema)},
            pipeline.store,
            PlannerSettings(),
            graph=pipeline.graph,
        )


def test_requests_that_failed_planning_are_replayed_through_the_cli_and_apply(
    pipeline: Pipeline,
) -> None:
    planner = UpgradablePlanner(pipeline)
    pipeline.start_planner(planner)
    pipeline.start_applier()
    # Given two requests naming a graph schema version the planner does not have yet
    newer = "2026-12-02"
    ids = submit(
        pipeline,
        request("doc-a", DOC_V1, schema_version=newer),
        request("doc-b", DOC_V2, schema_version=newer),
    )
    entries = {e.document_id: e for e in pipeline.dlq_entries(2)}
    assert {e.code for e in entries.values()} == {StatusCode.FAILED_PRECONDITION}
    assert {e.original_topic for e in entries.values()} == {pipeline.settings.topics.requests}

    # When the planner has the schema, and one entry is replayed, then all the others
    planner.upgrade(pipeline, newer)
    runner = CliRunner(env=pipeline.env())
    one = runner.invoke(cli, ["dlq", "replay", entries["doc-a"].dlq_id])
    assert one.exit_code == 0, one.output
    assert f"request re-submitted to {pipeline.settings.topics.requests}" in one.output
    rest = runner.invoke(cli, ["dlq", "replay-all"])
    assert rest.exit_code == 0, rest.output

    # Then both are planned and applied, and their entries are REPLAYED
    for submission_id, document_id in zip(ids, ("doc-a", "doc-b"), strict=True):
        pipeline.wait_stage(planned_as(pipeline, submission_id), Stage.COMPLETED)
        state = pipeline.store.get_document_state("kb", document_id)
        assert state is not None and (state.revision, state.schema_version) == (1, newer)
    replayed = [pipeline.store.get_dlq_entry(e.dlq_id) for e in entries.values()]
    assert all(e is not None and e.status.value == "REPLAYED" for e in replayed)
    # the requests went back as the producer sent them, marked with their entry
    resent = {
        h[kafka_headers.DLQ_REPLAY].decode(): (k, h[kafka_headers.SUBMISSION_ID].decode())
        for k, _, h in read_to_end(pipeline.settings, pipeline.settings.topics.requests)
        if kafka_headers.DLQ_REPLAY in h
    }
    assert resent == {
        entries["doc-a"].dlq_id: (b"kb/doc-a", ids[0]),
        entries["doc-b"].dlq_id: (b"kb/doc-b", ids[1]),
    }


def test_a_replayed_request_that_fails_planning_again_returns_to_its_entry(
    pipeline: Pipeline,
) -> None:
    planner = UpgradablePlanner(pipeline)
    pipeline.start_planner(planner)
    pipeline.start_applier()
    runner = CliRunner(env=pipeline.env())
    # Given a request naming a graph schema version the planner does not have: a planning entry
    newer = "2026-12-03"
    [submission_id] = submit(pipeline, request("doc-a", DOC_V1, schema_version=newer))
    [entry] = pipeline.dlq_entries(1)

    # When it is replayed while the planner still lacks that schema
    replayed = runner.invoke(cli, ["dlq", "replay", entry.dlq_id])
    assert replayed.exit_code == 0, replayed.output

    # Then it fails again into the same entry: PENDING_REVIEW, two attempts, where it came from
    def failed_again() -> DlqEntry | None:
        found = pipeline.store.get_dlq_entry(entry.dlq_id)
        return found if found is not None and found.attempts == 2 else None

    again = wait_until(failed_again, timeout_s=60, what="the replay to fail again")
    assert again.status is DlqStatus.PENDING_REVIEW
    coordinates = (again.original_topic, again.original_partition, again.original_offset)
    assert coordinates == (entry.original_topic, entry.original_partition, entry.original_offset)
    assert [e.dlq_id for e in pipeline.store.list_dlq_entries(DlqQuery())] == [entry.dlq_id]
    shown = runner.invoke(cli, ["dlq", "show", entry.dlq_id, "--json"])
    assert shown.exit_code == 0, shown.output
    attempts = json.loads(shown.output)["envelope"]["attempts"]
    assert [(a["attempt"], a["code"]) for a in attempts] == [
        (1, "FAILED_PRECONDITION"),
        (2, "FAILED_PRECONDITION"),
    ]
    submission = pipeline.store.get_submission(submission_id)
    assert submission is not None and submission.dlq_id == entry.dlq_id

    # When the planner has the schema and the entry is replayed once more
    planner.upgrade(pipeline, newer)
    replayed = runner.invoke(cli, ["dlq", "replay", entry.dlq_id])
    assert replayed.exit_code == 0, replayed.output

    # Then the request is planned and applied, and the one entry is REPLAYED
    pipeline.wait_stage(planned_as(pipeline, submission_id), Stage.COMPLETED)
    state = pipeline.store.get_document_state("kb", "doc-a")
    assert state is not None and state.schema_version == newer
    done = pipeline.store.get_dlq_entry(entry.dlq_id)
    assert done is not None and (done.status, done.attempts) == (DlqStatus.REPLAYED, 2)
    assert len(pipeline.store.list_dlq_entries(DlqQuery())) == 1


def test_submit_wait_follows_a_submission_through_its_replan_to_completed(
    pipeline: Pipeline,
) -> None:
    # Given two versions planned on the committed state (none), as after a rebalance: the
    # second will meet a CONFLICT and be replanned
    first, second = versions_planned_apart(pipeline)
    op2 = planned_as(pipeline, second)
    planned_as(pipeline, first)

    # When they apply while `submit --wait` follows them
    pipeline.start_applier()
    followed = follow(pipeline.store, [first, second], timeout_s=120, poll_s=0.1)

    # Then the second is followed past its CONFLICT to its replan, which completed
    assert [f.completed for f in followed] == [True, True], [f.where for f in followed]
    replan = pipeline.store.get_replan(op2)
    assert replan is not None and replan.outcome is ReplanOutcome.REPLANNED
    assert followed[1].operation is not None
    assert followed[1].operation.operation_id == replan.replanned_as != op2
    state = pipeline.store.get_document_state("kb", "doc")
    assert state is not None and state.operation_id == replan.replanned_as
