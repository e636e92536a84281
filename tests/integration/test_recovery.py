"""`graph-ingest resume` and `graph-ingest recover` against the real services.

Stranded operations are made the way they happen: an applier whose Neo4j writes time out for some
plans leaves them FAILED, one whose state commits time out leaves them GRAPH_APPLIED (the graph is
written, the state is not), and their retry copies are lost; a later version of a failed document
stays PARKED behind it. The applier has moved past all of their messages, so nothing but a resume
brings them back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import encode_operation
from graph_ingest.schemas.plan_messages import plan_message
from graph_ingest.settings import Settings
from graph_ingest.stack.process import start_bound
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.errors import StoreError
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import run_applier
from tests.integration.pipeline import FailingWriter, Pipeline
from tests.kafka_messages import read_to_end
from tests.samples import Entity, sample_plan, work_headers_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class _CommitFailingUnitOfWork:
    def __init__(self, inner: UnitOfWork, documents: set[str]) -> None:
        self._inner = inner
        self._documents = documents

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def commit_document_states(self, states: Sequence[DocumentState]) -> set[tuple[str, str]]:
        if any(s.document_id in self._documents for s in states):
            raise StoreError(
                "injected: the state commit timed out", code=StatusCode.DEADLINE_EXCEEDED
            )
        return self._inner.commit_document_states(states)


class CommitFailingStore(PostgresOperationStore):
    """The real store, timing out the state commit of ``documents``: their operations stay
    GRAPH_APPLIED, their graph written, and the applier routes them to a retry tier."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(
            settings.postgres,
            event_encoder=encode_operation,
            operations_topic=settings.topics.operations,
        )
        self.documents: set[str] = set()

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        with super().unit_of_work() as uow:
            yield _CommitFailingUnitOfWork(uow, self.documents)  # type: ignore[misc]


@dataclass
class FaultyApplier:
    """One applier thread whose graph writes (``writer.culprits``, node ids) and state commits
    (``store.documents``) fail on cue; clear both to heal it."""

    writer: FailingWriter
    store: CommitFailingStore
    stop: threading.Event = field(default_factory=threading.Event)

    def heal(self) -> None:
        self.writer.culprits.clear()
        self.store.documents.clear()


@pytest.fixture
def applier(pipeline: Pipeline) -> Iterator[FaultyApplier]:
    faulty = FaultyApplier(
        FailingWriter(pipeline.settings, StatusCode.DEADLINE_EXCEEDED),
        CommitFailingStore(pipeline.settings),
    )
    thread = threading.Thread(
        target=run_applier,
        args=(pipeline.settings, faulty.stop),
        # no relay beside it: the outbox keeps what it routes until a test starts one
        kwargs={"store": faulty.store, "graph": faulty.writer, "relay": False},
        name="faulty-applier",
        daemon=True,
    )
    thread.start()
    yield faulty
    faulty.stop.set()
    thread.join(timeout=60)


def person(name: str) -> Entity:
    return Entity("Person", name)


def plan_of(p: Pipeline, document_id: str, previous: DocumentState | None = None) -> IngestionPlan:
    """A plan with a node of its own (so a culprit node fails this plan only)."""
    version = previous.revision + 1 if previous else 1
    who = person(f"{document_id} v{version}")
    return sample_plan(
        "it", document_id, f"{who.name} exists.", [who], [], previous=previous, graph=p.graph
    )


def node_of(plan: IngestionPlan) -> str:
    return plan.mutation.node_upserts[0].node_id


def failed(p: Pipeline, a: FaultyApplier, *plans: IngestionPlan) -> None:
    """Publish ``plans`` so that their graph write times out; wait until they are FAILED, then
    lose their retry-tier copies (still in the outbox: no relay runs): stranded FAILED."""
    a.writer.culprits.update(node_of(plan) for plan in plans)
    p.publish(*plans)
    for plan in plans:
        p.wait_stage(plan.operation_id, Stage.FAILED)
    lose_retry_copies(p)


def lose_retry_copies(p: Pipeline) -> None:
    """Delete the retry-tier copies the applier routed (they wait in the outbox: no relay)."""
    tiers = [topic for topic, _ in p.settings.topics.retry_tiers]
    p.execute("DELETE FROM outbox WHERE topic = ANY(%s)", tiers)
    wait_until(  # recover leaves an operation alone while a retry is scheduled for it
        lambda: p.sql("SELECT count(*) FROM operations WHERE next_retry_at > now()") == [(0,)],
        timeout_s=30,
        what="the scheduled retries to be due",
    )


def graph_applied(p: Pipeline, a: FaultyApplier, *plans: IngestionPlan) -> None:
    """Publish ``plans`` so that their state commit fails; wait until they are left
    GRAPH_APPLIED with that error."""
    a.store.documents.update(plan.document_id for plan in plans)
    p.publish(*plans)
    for plan in plans:

        def stranded(op_id: str = plan.operation_id) -> bool:
            operation = p.store.get_operation(op_id)
            return bool(
                operation and operation.stage is Stage.GRAPH_APPLIED and operation.last_error
            )

        wait_until(stranded, timeout_s=60, what=f"{plan.operation_id} left GRAPH_APPLIED")
    lose_retry_copies(p)


def resumed_messages(p: Pipeline, via: str) -> Counter[str]:
    """How many times each operation's plan was re-published by ``via`` (resume / recover),
    checking that every copy is the stored frozen plan, byte for byte."""
    counts: Counter[str] = Counter()
    for key, value, headers in read_to_end(p.settings, p.settings.topics.plans):
        if headers.get("resumed") == via.encode():
            op_id = headers["operation_id"].decode()
            assert value == p.store.get_plan_bytes(op_id)
            operation = p.store.get_operation(op_id)
            assert operation is not None
            assert key == f"{operation.space}/{operation.document_id}".encode()
            counts[op_id] += 1
    return counts


# -- resume ----------------------------------------------------------------------------------


def test_resume_completes_a_failed_operation(pipeline: Pipeline, applier: FaultyApplier) -> None:
    plan = plan_of(pipeline, "doc-failed")
    failed(pipeline, applier, plan)
    applier.heal()

    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", plan.operation_id])

    assert result.exit_code == 0, result.output
    assert f"resumed {plan.operation_id} FAILED it/doc-failed" in result.output
    done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert done.attempts == 1
    assert node_of(plan) in pipeline.graph_elements()[0]
    assert resumed_messages(pipeline, "resume") == {plan.operation_id: 1}


def test_resume_of_a_graph_applied_operation_commits_its_state_without_writing_again(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    plan = plan_of(pipeline, "doc-applied")
    graph_applied(pipeline, applier, plan)
    written = applier.writer.mutations_written
    applier.heal()

    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", plan.operation_id, "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["stage"] == "GRAPH_APPLIED"
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert applier.writer.mutations_written == written  # resumed at the state commit
    state = pipeline.store.get_document_state("it", "doc-applied")
    assert state is not None and state.operation_id == plan.operation_id


def lost_release(p: Pipeline, document_id: str = "doc-parked") -> IngestionPlan:
    """v2 parked behind v1, then v1 committed while the release of v2 went missing (the relay
    must not run yet); returns v2."""
    v1 = plan_of(p, document_id)
    v2 = plan_of(p, document_id, previous=v1.next_state)
    p.publish(v2)
    p.wait_stage(v2.operation_id, Stage.PARKED)
    p.publish(v1)
    p.wait_stage(v1.operation_id, Stage.COMPLETED)
    p.execute(
        "DELETE FROM outbox WHERE topic = %s AND operation_id = %s",
        p.settings.topics.plans,
        v2.operation_id,
    )
    return v2


def test_resume_completes_a_parked_operation_whose_release_was_lost(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    v2 = lost_release(pipeline)

    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", v2.operation_id])

    assert result.exit_code == 0, result.output
    pipeline.wait_stage(v2.operation_id, Stage.COMPLETED)
    state = pipeline.store.get_document_state("it", "doc-parked")
    assert state is not None and state.revision == 2


def test_resume_of_an_unknown_operation_exits_not_found(pipeline: Pipeline) -> None:
    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", "op_nope"])

    assert result.exit_code == ExitCode.NOT_FOUND
    assert "op_nope not found" in result.output


def test_resume_refuses_completed_and_conflict_operations(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    done = plan_of(pipeline, "doc-done")
    stale = sample_plan(
        "it", "doc-done", "Someone else.", [person("else")], [], graph=pipeline.graph
    )
    pipeline.publish(done)
    pipeline.wait_stage(done.operation_id, Stage.COMPLETED)
    pipeline.publish(stale)  # planned against revision 0 too
    pipeline.wait_stage(stale.operation_id, Stage.CONFLICT)
    runner = CliRunner(env=pipeline.env())

    completed = runner.invoke(cli, ["resume", done.operation_id])
    conflict = runner.invoke(cli, ["resume", stale.operation_id])

    assert completed.exit_code == ExitCode.INVALID_INPUT
    assert "is COMPLETED: there is nothing to resume" in completed.output
    assert conflict.exit_code == ExitCode.INVALID_INPUT
    assert "the plan is stale" in conflict.output and "a replan is needed" in conflict.output
    assert resumed_messages(pipeline, "resume") == {}


# -- recover ---------------------------------------------------------------------------------


def recover_process(p: Pipeline, *args: str) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "recover", "--json", *args],
        env={**os.environ, **p.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_two_concurrent_recoverers_resume_each_stranded_operation_exactly_once(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    # Given operations stranded FAILED, GRAPH_APPLIED and PARKED (a lost release), one parked
    # behind a failed one, and two that completed
    completed = [plan_of(pipeline, f"doc-ok-{i}") for i in range(2)]
    pipeline.publish(*completed)
    for plan in completed:
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    stuck_failed = [plan_of(pipeline, f"doc-f-{i}") for i in range(4)]
    failed(pipeline, applier, *stuck_failed)
    stuck_applied = [plan_of(pipeline, f"doc-g-{i}") for i in range(3)]
    graph_applied(pipeline, applier, *stuck_applied)
    waiting = plan_of(pipeline, "doc-f-0", previous=stuck_failed[0].next_state)
    pipeline.publish(waiting)  # parked behind a failed plan: not stranded, it will be released
    pipeline.wait_stage(waiting.operation_id, Stage.PARKED)
    lost = lost_release(pipeline)
    stranded = {p.operation_id for p in (*stuck_failed, *stuck_applied, lost)}
    applier.heal()
    pipeline.start_relay()  # releases parked plans

    # When two recoverers run at once, each allowed more than half of them
    limit = len(stranded) // 2 + 1
    runs = [recover_process(pipeline, "--older-than", "0s", "--limit", str(limit)) for _ in "ab"]
    outputs = [run.communicate(timeout=180) for run in runs]

    # Then they claimed disjoint sets that together are every stranded operation
    reports = []
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr.decode()
        reports.append(json.loads(stdout))
    taken = [[item["operation_id"] for item in r["operations"]] for r in reports]
    assert not set(taken[0]) & set(taken[1])
    # (`waiting` too, when a recoverer looks after its predecessor completed and before its
    # release is consumed: at --older-than 0s that is a lost release; resuming it is idempotent)
    assert set(taken[0]) | set(taken[1]) in (stranded, stranded | {waiting.operation_id})
    for report in reports:
        assert {item["action"] for item in report["operations"]} <= {"resumed"}
        times = [item["updated_at"] for item in report["operations"]]
        assert times == sorted(times)  # oldest first
    # and every one of them completes, each re-published exactly once
    for op_id in (*stranded, waiting.operation_id):
        pipeline.wait_stage(op_id, Stage.COMPLETED, timeout_s=120)
    assert resumed_messages(pipeline, "recover") == dict.fromkeys(set().union(*taken), 1)
    assert pipeline.store.get_document_state("it", "doc-f-0").revision == 2  # type: ignore[union-attr]
    for plan in completed:
        operation = pipeline.store.get_operation(plan.operation_id)
        assert operation is not None and operation.sequence == 4  # untouched
    again = CliRunner(env=pipeline.env()).invoke(cli, ["recover", "--older-than", "0s"])
    assert again.exit_code == 0, again.output
    assert "nothing to recover" in again.output


def test_recover_reports_a_plan_it_cannot_resume_and_resumes_the_others(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    plans = [plan_of(pipeline, f"doc-{i}") for i in range(3)]
    failed(pipeline, applier, *plans)
    applier.heal()
    broken = plans[1].operation_id
    # The stored bytes rot (the trigger guards the plan: go around it, as a disk would)
    pipeline.execute("ALTER TABLE operations DISABLE TRIGGER operations_frozen")
    pipeline.execute(
        "UPDATE operations SET plan_bytes = %s WHERE operation_id = %s", b"\x00rot", broken
    )

    result = CliRunner(env=pipeline.env()).invoke(cli, ["recover", "--older-than", "0s"])

    assert result.exit_code == ExitCode.ERROR, result.output
    lines = result.output.splitlines()
    assert f"failed   {broken} FAILED          it/doc-1: DATA_LOSS" in result.output
    assert sum(line.startswith("resumed  ") for line in lines) == 2
    assert lines[-1].startswith("recover: 3 claimed: 2 resumed, 1 failed, 0 skipped")
    for plan in (plans[0], plans[2]):
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    operation = pipeline.store.get_operation(broken)
    assert operation is not None and operation.stage is Stage.FAILED
    lease = pipeline.sql(
        "SELECT recovery_lease_until FROM operations WHERE operation_id = %s", broken
    )
    assert lease == [(None,)]  # released: the next run tries again


# -- re-sends carry the headers that say whose work a plan is (issue 16 item 13) ----------------


def publish_with_work_headers(p: Pipeline, plan: IngestionPlan) -> None:
    message = plan_message(plan, p.settings.topics.plans, headers=work_headers_of(plan))
    p.publish_raw(message.key or b"", message.value, dict(message.headers))


def resent_headers(p: Pipeline, header: str) -> dict[str, dict[str, bytes]]:
    """The headers of every plan message re-sent with ``header`` (resumed, released), by
    operation id."""
    return {
        headers[kafka_headers.OPERATION_ID].decode(): headers
        for _key, _value, headers in read_to_end(p.settings, p.settings.topics.plans)
        if header in headers
    }


def test_resume_and_release_carry_the_traceparent_and_submission_id_of_the_plan(
    pipeline: Pipeline, applier: FaultyApplier
) -> None:
    # Given v1, published with a traceparent and a submission id, stranded FAILED, and v2 (with
    # its own) PARKED behind it
    v1 = plan_of(pipeline, "doc-traced")
    v2 = plan_of(pipeline, "doc-traced", previous=v1.next_state)
    applier.writer.culprits.add(node_of(v1))
    publish_with_work_headers(pipeline, v1)
    pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    lose_retry_copies(pipeline)
    publish_with_work_headers(pipeline, v2)
    pipeline.wait_stage(v2.operation_id, Stage.PARKED)
    applier.heal()
    pipeline.start_relay()  # publishes v2's release when v1 completes

    # When v1 is resumed
    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", v1.operation_id])

    # Then both complete, and each re-sent message carries the headers its plan first came with
    assert result.exit_code == 0, result.output
    for plan in (v1, v2):
        pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    resumed = resent_headers(pipeline, kafka_headers.RESUMED)[v1.operation_id]
    released = wait_until(
        lambda: resent_headers(pipeline, kafka_headers.RELEASED).get(v2.operation_id),
        timeout_s=30,
        what="v2's release on the plans topic",
    )
    for plan, headers in ((v1, resumed), (v2, released)):
        carried = {name: headers.get(name, b"").decode() for name in work_headers_of(plan)}
        assert carried == work_headers_of(plan)
