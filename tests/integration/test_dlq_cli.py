"""`graph-ingest dlq …` end to end: a real applier dead-letters plans, the CLI reviews, replays,
purges and reindexes them.

DLQ entries are made the way they happen: a plan whose edge points at a node that does not exist
yet fails FAILED_PRECONDITION and goes to the DLQ at once; once another plan has created the
node, its replay completes. A message that is no plan goes there too, and can only be purged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Producer

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.domain.trace import new_trace_id
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.schemas.headers import RetryHeaders
from graph_ingest.schemas.plan_messages import plan_message
from graph_ingest.stack.process import start_bound
from graph_ingest.store.dlq_index import DlqEntry
from graph_ingest.waiting import wait_until
from tests.cli_errors import json_error, not_found
from tests.integration.pipeline import Pipeline
from tests.kafka_messages import read_to_end
from tests.samples import Entity, Relation, sample_plan, work_headers_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SPACE = "it"


def ghost(i: int) -> Entity:
    return Entity("Person", f"Ghost {i}")


def dangling(
    p: Pipeline, i: int, document_id: str | None = None, space: str = SPACE
) -> IngestionPlan:
    """Walker i -[KNOWS]-> Ghost i, upserting the walker only: it fails until Ghost i exists
    (in ``space``)."""
    walker = Entity("Person", f"Walker {i}")
    plan = sample_plan(
        space,
        document_id or f"doc-{i}",
        f"Walker {i} knows Ghost {i}.",
        [walker, ghost(i)],
        [Relation(walker, "KNOWS", ghost(i))],
        graph=p.graph,
    )
    mutation = plan.mutation
    walker_only = tuple(n for n in mutation.node_upserts if n.node_id == walker.node_id(space))
    return IngestionPlan.freeze(
        **{
            **plan.model_dump(exclude={"fingerprint", "mutation"}),
            "mutation": mutation.model_copy(update={"node_upserts": walker_only}),
        }
    )


def walker(
    p: Pipeline, document_id: str, previous: IngestionPlan, text: str = "Walker 1."
) -> IngestionPlan:
    """The next version of ``previous``'s document: Walker 1 alone, planned on its state."""
    return sample_plan(
        SPACE,
        document_id,
        text,
        [Entity("Person", "Walker 1")],
        [],
        previous=previous.next_state,
        graph=p.graph,
    )


def ghosts(p: Pipeline, *numbers: int) -> IngestionPlan:
    """The plan that creates the missing nodes, published and COMPLETED."""
    plan = sample_plan(
        SPACE, "doc-ghosts", "Ghosts.", [ghost(i) for i in numbers], [], graph=p.graph
    )
    p.publish(plan)
    p.wait_stage(plan.operation_id, Stage.COMPLETED)
    return plan


def dead_lettered(p: Pipeline, *plans: IngestionPlan) -> dict[str, DlqEntry]:
    """Publish ``plans`` (the applier running) and wait for their DLQ entries, by operation id."""
    p.publish(*plans)
    for plan in plans:
        p.wait_stage(plan.operation_id, Stage.DEAD_LETTERED)
    entries = {e.operation_id: e for e in p.dlq_entries(len(plans))}
    return {plan.operation_id: entries[plan.operation_id] for plan in plans}


def dlq(p: Pipeline, *args: str) -> Result:
    return CliRunner(env=p.env()).invoke(cli, ["dlq", *args])


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def statuses(p: Pipeline) -> dict[str, str]:
    return dict(p.sql("SELECT dlq_id, status FROM dlq_entries"))


def replays(p: Pipeline) -> Counter[str]:
    """How many plan messages on the plans topic replayed each DLQ entry (header dlq_replay)."""
    counts: Counter[str] = Counter()
    for _key, _value, headers in read_to_end(p.settings, p.settings.topics.plans):
        if kafka_headers.DLQ_REPLAY in headers:
            counts[headers[kafka_headers.DLQ_REPLAY].decode()] += 1
    return counts


def completed(p: Pipeline, *plans: IngestionPlan) -> None:
    for plan in plans:
        p.wait_stage(plan.operation_id, Stage.COMPLETED)


# -- list, show, stats -------------------------------------------------------------------------


def test_list_show_and_stats_as_tables_and_json(pipeline: Pipeline) -> None:
    # Given two plans with a dangling edge and a message that is no plan, dead-lettered
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(2)]
    by_op = dead_lettered(pipeline, *plans)
    pipeline.publish_raw(b"it/doc-junk", b"\x00not a plan")
    junk = next(e for e in pipeline.dlq_entries(3) if e.operation_id is None)
    first = by_op[plans[0].operation_id]

    # list: a table, and JSON with every filter
    table = dlq(pipeline, "list")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert " ".join(lines[0].split()) == "DLQ ID STATUS CODE AGE ATTEMPTS DOCUMENT OPERATION"
    assert len(lines) == 4
    assert f"{first.dlq_id}  PENDING_REVIEW  FAILED_PRECONDITION" in table.stdout
    listed = as_json(dlq(pipeline, "list", "--json"))["entries"]
    assert {e["dlq_id"] for e in listed} == {junk.dlq_id, *(e.dlq_id for e in by_op.values())}
    assert [e["dead_lettered_at"] for e in listed] == sorted(e["dead_lettered_at"] for e in listed)

    def ids(*args: str) -> set[str]:
        return {e["dlq_id"] for e in as_json(dlq(pipeline, "list", "--json", *args))["entries"]}

    assert ids("--code", "invalid_argument") == {junk.dlq_id}
    assert ids("--space", SPACE, "--document", "doc-0") == {first.dlq_id}
    assert ids("--status", "PENDING_REVIEW", "--limit", "1") == {listed[0]["dlq_id"]}
    assert dlq(pipeline, "list", "--limit", "2").stdout.splitlines()[-1] == (
        "(the oldest 2 shown: --limit to see more)"
    )
    assert ids("--older-than", "1h") == set()
    assert len(ids("--older-than", "0s")) == 3
    assert dlq(pipeline, "list", "--status", "resolved").stdout == "no DLQ entries match\n"

    # show: the envelope, the attempts, the plan
    shown = dlq(pipeline, "show", first.dlq_id)
    assert shown.exit_code == 0, shown.output
    assert f"operation     {plans[0].operation_id} (stage DEAD_LETTERED)" in shown.stdout
    assert "1 node upserts, 1 edge upserts, 0 node deletes, 0 edge deletes" in shown.stdout
    assert "  #1   " in shown.stdout and "FAILED_PRECONDITION" in shown.stdout
    detail = as_json(dlq(pipeline, "show", first.dlq_id, "--json"))
    assert detail["plan"]["decodes"] is True
    assert detail["plan"]["operation_id"] == plans[0].operation_id
    assert (detail["plan"]["expected_revision"], detail["plan"]["edge_upserts"]) == (0, 1)
    assert detail["operation_stage"] == "DEAD_LETTERED"
    assert len(detail["envelope"]["attempts"]) == 1
    assert detail["envelope"]["original_key"] == "aXQvZG9jLTA="  # it/doc-0, base64
    not_a_plan = as_json(dlq(pipeline, "show", junk.dlq_id, "--json"))
    assert not_a_plan["plan"]["decodes"] is False
    assert "plan          none: DecodeError" in dlq(pipeline, "show", junk.dlq_id).stdout

    # stats: by status and code, the oldest pending
    stats = as_json(dlq(pipeline, "stats", "--json"))
    assert stats["total"] == 3
    assert stats["by_status"] == {"PENDING_REVIEW": 3, "REPLAYED": 0, "RESOLVED": 0}
    assert stats["by_code"] == {"FAILED_PRECONDITION": 2, "INVALID_ARGUMENT": 1}
    assert stats["oldest_pending_age_s"] >= 0
    text = dlq(pipeline, "stats").stdout.splitlines()
    assert text[0].startswith("DLQ: 3 entries: 3 PENDING_REVIEW, 0 REPLAYED, 0 RESOLVED; oldest")
    assert text[1].split() == ["CODE", "PENDING_REVIEW", "REPLAYED", "RESOLVED"]
    assert text[2].split() == ["FAILED_PRECONDITION", "2", "0", "0"]


def test_unknown_ids_exit_not_found(pipeline: Pipeline) -> None:
    for args in (
        ("show", "dlq-nope"),
        ("replay", "dlq-nope"),
        ("purge", "dlq-nope", "--reason", "x"),
    ):
        result = dlq(pipeline, *args)
        assert result.exit_code == ExitCode.NOT_FOUND, result.output
        assert "DLQ entry dlq-nope not found" in result.stderr


def test_under_json_unknown_ids_are_json_errors_with_exit_code_3(pipeline: Pipeline) -> None:
    for args in (
        ("show", "dlq-nope"),
        ("replay", "dlq-nope"),
        ("purge", "dlq-nope", "--reason", "x"),
    ):
        result = dlq(pipeline, *args, "--json")

        assert result.exit_code == ExitCode.NOT_FOUND, result.output
        assert json_error(result) == not_found("DLQ entry dlq-nope not found")


def test_under_json_an_unreachable_postgresql_is_a_json_error_with_exit_code_4(
    pipeline: Pipeline,
) -> None:
    env = {
        **pipeline.env(),
        "GRAPH_INGEST_POSTGRES__PORT": "9",  # discard: nothing answers there
        "GRAPH_INGEST_POSTGRES__CONNECT_TIMEOUT_S": "2",
    }
    for args in (("list",), ("stats",), ("show", "dlq-x")):
        result = CliRunner(env=env).invoke(cli, ["dlq", *args, "--json"])

        assert result.exit_code == ExitCode.UNAVAILABLE, result.output
        assert json_error(result)["code"] == "UNAVAILABLE"


# -- replay ------------------------------------------------------------------------------------


def test_a_replayed_entry_completes_and_is_marked_replayed(pipeline: Pipeline) -> None:
    # Given a plan dead-lettered for want of a node, and that node created since
    pipeline.start_applier()
    plan = dangling(pipeline, 1)
    entry = dead_lettered(pipeline, plan)[plan.operation_id]
    ghosts(pipeline, 1)

    # When it is replayed
    result = dlq(pipeline, "replay", entry.dlq_id)

    # Then its frozen plan went back once, with the entry's id and trace, and completed
    assert result.exit_code == 0, result.output
    assert f"replayed {entry.dlq_id} {plan.operation_id}" in result.stdout
    done = pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert Stage.DEAD_LETTERED in done.stage_times
    assert ghost(1).node_id(SPACE) in pipeline.graph_elements()[0]
    assert statuses(pipeline) == {entry.dlq_id: "REPLAYED"}
    envelope = decode_dlq_envelope(pipeline.store.get_dlq_entry(entry.dlq_id).envelope)  # type: ignore[union-attr]
    assert envelope.note is not None and "replayed to" in envelope.note
    (message,) = [
        (value, headers)
        for _key, value, headers in read_to_end(pipeline.settings, pipeline.settings.topics.plans)
        if kafka_headers.DLQ_REPLAY in headers
    ]
    value, headers = message
    assert value == pipeline.store.get_plan_bytes(plan.operation_id)
    assert headers[kafka_headers.DLQ_REPLAY] == entry.dlq_id.encode()
    assert headers[kafka_headers.TRACE_ID] == envelope.attempts[-1].trace_id.encode()
    # and a second replay is refused: it needs --force, which finds nothing left to do
    again = dlq(pipeline, "replay", entry.dlq_id)
    assert again.exit_code == ExitCode.INVALID_INPUT
    assert "REPLAYED already: pass --force" in again.stderr
    forced = dlq(pipeline, "replay", entry.dlq_id, "--force")
    assert forced.exit_code == ExitCode.INVALID_INPUT
    assert "COMPLETED: there is nothing to replay" in forced.stderr
    assert replays(pipeline) == {entry.dlq_id: 1}


def test_a_replay_that_fails_again_returns_to_its_entry_with_its_history_extended(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    plan = dangling(pipeline, 1)
    entry = dead_lettered(pipeline, plan)[plan.operation_id]

    result = dlq(pipeline, "replay", entry.dlq_id, "--json")  # Ghost 1 still missing

    assert as_json(result)["action"] == "replayed"

    def failed_again() -> DlqEntry | None:
        found = pipeline.store.get_dlq_entry(entry.dlq_id)
        return found if found and found.attempts == 2 else None

    again = wait_until(failed_again, timeout_s=60, what="the replay to fail again")
    assert again.status is DlqStatus.PENDING_REVIEW
    history = decode_dlq_envelope(again.envelope).attempts
    assert [a.attempt for a in history] == [1, 2]
    assert history[1].trace_id == history[0].trace_id
    assert pipeline.store.get_operation(plan.operation_id).stage is Stage.DEAD_LETTERED  # type: ignore[union-attr]


def test_an_entry_that_holds_no_plan_is_refused_with_purge_suggested(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    pipeline.publish_raw(b"it/doc-junk", b"\x00not a plan")
    (junk,) = pipeline.dlq_entries(1)

    result = dlq(pipeline, "replay", junk.dlq_id)
    as_json_error = dlq(pipeline, "replay", junk.dlq_id, "--json")

    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "holds no plan that can be replayed" in result.stderr and "purge" in result.stderr
    assert as_json_error.exit_code == ExitCode.INVALID_INPUT
    error = json_error(as_json_error)
    assert error["code"] == "FAILED_PRECONDITION"
    assert "holds no plan that can be replayed" in error["message"]
    assert replays(pipeline) == {}


def test_replay_all_dry_run_reports_a_refusal_and_exits_0_the_real_run_exits_1(
    pipeline: Pipeline,
) -> None:
    # Given an entry that holds no plan: every replay of it is refused
    pipeline.start_applier()
    pipeline.publish_raw(b"it/doc-junk", b"\x00not a plan")
    (junk,) = pipeline.dlq_entries(1)

    # When replay-all runs dry, as text and as JSON
    dry = dlq(pipeline, "replay-all", "--dry-run")
    dry_json = dlq(pipeline, "replay-all", "--dry-run", "--json")

    # Then it ran: exit 0, the refusal reported with its reason
    assert dry.exit_code == ExitCode.OK, dry.output
    assert dry.stdout.splitlines()[-1].startswith("replay-all --dry-run: 1 seen: 0 replayed")
    assert "1 refused" in dry.stdout
    assert dry_json.exit_code == ExitCode.OK, dry_json.output
    (item,) = json.loads(dry_json.stdout)["entries"]
    assert (item["dlq_id"], item["action"]) == (junk.dlq_id, "refused")
    assert "holds no plan that can be replayed" in item["reason"]

    # and the real run still exits 1 for it, replaying nothing
    real = dlq(pipeline, "replay-all")
    assert real.exit_code == ExitCode.ERROR, real.output
    assert replays(pipeline) == {}
    assert statuses(pipeline) == {junk.dlq_id: "PENDING_REVIEW"}


def test_a_stale_plan_is_refused_a_replan_is_needed(pipeline: Pipeline) -> None:
    # Given a dead-lettered plan of a document that another plan has moved on since
    pipeline.start_applier()
    stale = dangling(pipeline, 1, document_id="doc-moved")
    entry = dead_lettered(pipeline, stale)[stale.operation_id]
    ghosts(pipeline, 1)
    moved = sample_plan(SPACE, "doc-moved", "Someone else.", [ghost(1)], [], graph=pipeline.graph)
    pipeline.publish(moved)
    pipeline.wait_stage(moved.operation_id, Stage.COMPLETED)

    # When it is replayed, alone or by replay-all
    result = dlq(pipeline, "replay", entry.dlq_id)
    bulk = dlq(pipeline, "replay-all", "--json")

    # Then it is refused: the frozen plan cannot apply any more
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "CONFLICT" in result.stderr and "a replan is needed" in result.stderr
    assert "revision 1, past the plan's expected revision 0" in result.stderr
    assert bulk.exit_code == ExitCode.ERROR
    (item,) = json.loads(bulk.stdout)["entries"]
    assert item["action"] == "refused" and "a replan is needed" in item["reason"]
    assert statuses(pipeline) == {entry.dlq_id: "PENDING_REVIEW"}
    assert replays(pipeline) == {}


def test_a_version_that_followed_its_predecessor_waits_for_it_and_completes_after_it(
    pipeline: Pipeline,
) -> None:
    # Given a dead-lettered v1 and a v2 of the same document that followed it to the DLQ
    pipeline.start_applier()
    v1 = dangling(pipeline, 1, document_id="doc-chain")
    leader = dead_lettered(pipeline, v1)[v1.operation_id]
    v2 = walker(pipeline, "doc-chain", v1)
    follower = dead_lettered(pipeline, v2)[v2.operation_id]
    assert follower.parked_behind == v1.operation_id

    # When v2 is replayed alone, or all are looked at dry
    alone = dlq(pipeline, "replay", follower.dlq_id)
    dry = as_json(dlq(pipeline, "replay-all", "--dry-run", "--json"))

    # Then v2 waits for v1, which is to be replayed
    assert alone.exit_code == ExitCode.INVALID_INPUT
    assert f"waits behind operation {v1.operation_id}" in alone.stderr
    assert "replay that one" in alone.stderr
    assert {e["dlq_id"]: e["action"] for e in dry["entries"]} == {
        leader.dlq_id: "would-replay",
        follower.dlq_id: "waiting",
    }
    assert replays(pipeline) == {}

    # When v1 can apply and replay-all runs
    ghosts(pipeline, 1)
    result = dlq(pipeline, "replay-all")

    # Then v1 completes, v2 after it, and both entries are REPLAYED
    assert result.exit_code == 0, result.output
    completed(pipeline, v1, v2)
    state = pipeline.store.get_document_state(SPACE, "doc-chain")
    assert state is not None and (state.revision, state.operation_id) == (2, v2.operation_id)
    wait_until(
        lambda: set(statuses(pipeline).values()) == {"REPLAYED"},
        timeout_s=30,
        what="both entries REPLAYED",
    )


# -- replay-all --------------------------------------------------------------------------------


def test_replay_all_dry_run_changes_nothing_then_replays_each_entry_once(
    pipeline: Pipeline,
) -> None:
    # Given three dead-lettered plans whose missing nodes exist now
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(3)]
    by_op = dead_lettered(pipeline, *plans)
    ghosts(pipeline, 0, 1, 2)
    before = pipeline.dlq_entries(3)

    # When replay-all runs dry
    dry = dlq(pipeline, "replay-all", "--dry-run", "--json")

    # Then it lists all three and changes nothing
    report = as_json(dry)
    assert report["dry_run"] is True
    assert [e["action"] for e in report["entries"]] == ["would-replay"] * 3
    assert {e["dlq_id"] for e in report["entries"]} == {e.dlq_id for e in by_op.values()}
    assert pipeline.dlq_entries(3) == before
    assert replays(pipeline) == {}

    # When it replays one (--limit), then the rest
    one = dlq(pipeline, "replay-all", "--limit", "1")
    rest = dlq(pipeline, "replay-all")

    # Then every plan completed, every entry is REPLAYED, and each went back exactly once
    assert one.exit_code == 0, one.output
    assert one.stdout.splitlines()[-1].startswith("replay-all: 1 seen: 1 replayed")
    assert rest.exit_code == 0, rest.output
    assert rest.stdout.splitlines()[-1].startswith("replay-all: 2 seen: 2 replayed")
    completed(pipeline, *plans)
    assert set(statuses(pipeline).values()) == {"REPLAYED"}
    assert replays(pipeline) == dict.fromkeys((e.dlq_id for e in by_op.values()), 1)
    nothing = dlq(pipeline, "replay-all")
    assert nothing.exit_code == 0 and "0 seen" in nothing.stdout


def test_replay_all_keeps_to_its_rate(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(5)]
    dead_lettered(pipeline, *plans)
    ghosts(pipeline, *range(5))

    started = time.monotonic()
    result = dlq(pipeline, "replay-all", "--rate", "4")
    took = time.monotonic() - started

    assert result.exit_code == 0, result.output
    assert "5 replayed" in result.stdout
    assert took >= (5 - 1) / 4  # 5 publishes at most 4 per second: the first at once
    completed(pipeline, *plans)


def replay_all_process(p: Pipeline, *args: str) -> subprocess.Popen[bytes]:
    return start_bound(
        [sys.executable, "-m", "graph_ingest.cli.main", "dlq", "replay-all", "--json", *args],
        env={**os.environ, **p.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_an_interrupted_replay_all_goes_on_where_it_stopped_without_replaying_twice(
    pipeline: Pipeline,
) -> None:
    # Given six dead-lettered plans, ready to replay
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(6)]
    by_op = dead_lettered(pipeline, *plans)
    ghosts(pipeline, *range(6))

    # When a slow replay-all is stopped (SIGTERM) after it has replayed two
    run = replay_all_process(pipeline, "--rate", "2")
    try:
        wait_until(
            lambda: Counter(statuses(pipeline).values())["REPLAYED"] >= 2,
            timeout_s=60,
            what="two entries replayed",
        )
        run.send_signal(signal.SIGTERM)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    # Then it stopped after the entry in hand, marked what it replayed, and said so
    assert run.returncode == ExitCode.INTERRUPTED, stderr.decode()
    report = json.loads(stdout)
    assert report["interrupted"] is True
    first_run = {e["dlq_id"] for e in report["entries"] if e["action"] == "replayed"}
    assert 2 <= len(first_run) < 6
    assert {d for d, s in statuses(pipeline).items() if s == "REPLAYED"} == first_run

    # When it runs again
    again = dlq(pipeline, "replay-all", "--json")

    # Then it replays the others only: each plan went back exactly once, and all completed
    second_run = {e["dlq_id"] for e in as_json(again)["entries"]}
    assert second_run == {e.dlq_id for e in by_op.values()} - first_run
    assert replays(pipeline) == dict.fromkeys((e.dlq_id for e in by_op.values()), 1)
    completed(pipeline, *plans)


# -- purge, reindex ----------------------------------------------------------------------------


def test_a_purged_entry_is_resolved_with_its_reason_and_never_replayed(
    pipeline: Pipeline,
) -> None:
    pipeline.start_applier()
    plan = dangling(pipeline, 1)
    entry = dead_lettered(pipeline, plan)[plan.operation_id]

    result = dlq(pipeline, "purge", entry.dlq_id, "--reason", "Ghost 1 will never exist")

    assert result.exit_code == 0, result.output
    assert f"resolved {entry.dlq_id} {plan.operation_id}: Ghost 1 will never exist" in result.stdout
    assert statuses(pipeline) == {entry.dlq_id: "RESOLVED"}
    shown = dlq(pipeline, "show", entry.dlq_id)
    assert "status        RESOLVED: Ghost 1 will never exist" in shown.stdout
    replayed = dlq(pipeline, "replay", entry.dlq_id, "--force")
    assert replayed.exit_code == ExitCode.INVALID_INPUT
    assert "RESOLVED" in replayed.stderr
    assert dlq(pipeline, "replay-all").stdout.splitlines()[-1].startswith("replay-all: 0 seen")
    twice = dlq(pipeline, "purge", entry.dlq_id, "--reason", "again")
    assert twice.exit_code == ExitCode.INVALID_INPUT
    assert "RESOLVED already" in twice.stderr
    assert replays(pipeline) == {}


def test_reindex_rebuilds_the_index_from_the_dlq_topic(pipeline: Pipeline) -> None:
    # Given entries pending, replayed, failed again after a replay, resolved, and no plan
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(4)]
    by_op = dead_lettered(pipeline, *plans)
    pipeline.publish_raw(b"it/doc-junk", b"\x00not a plan")
    pipeline.dlq_entries(5)
    pending, replayed, failing, resolved = (by_op[p.operation_id].dlq_id for p in plans)
    ghosts(pipeline, 1)  # what the plan to replay needs
    assert dlq(pipeline, "replay", replayed).exit_code == 0
    pipeline.wait_stage(plans[1].operation_id, Stage.COMPLETED)
    assert dlq(pipeline, "replay", failing).exit_code == 0  # Ghost 2 is missing: back it comes
    wait_until(
        lambda: pipeline.store.get_dlq_entry(failing).attempts == 2,  # type: ignore[union-attr]
        timeout_s=60,
        what="the replay to fail again",
    )
    assert dlq(pipeline, "purge", resolved, "--reason", "obsolete").exit_code == 0
    snapshot = sorted(pipeline.dlq_entries(5), key=lambda e: e.dlq_id)

    # When the index is lost and rebuilt
    pipeline.execute("DELETE FROM dlq_entries")
    result = dlq(pipeline, "reindex", "--json")

    # Then it holds exactly what it held
    report = as_json(result)
    assert report["entries"] == 5 and report["rows_before"] == 0
    assert report["by_status"] == {"PENDING_REVIEW": 3, "REPLAYED": 1, "RESOLVED": 1}
    assert sorted(pipeline.dlq_entries(5), key=lambda e: e.dlq_id) == snapshot
    assert statuses(pipeline)[pending] == "PENDING_REVIEW"
    # and a second reindex changes nothing
    text = dlq(pipeline, "reindex")
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("reindexed 5 entries from ")
    assert sorted(pipeline.dlq_entries(5), key=lambda e: e.dlq_id) == snapshot

    # When an entry changes while the relay is down (its envelope still in the outbox)
    pipeline.stop_workers()
    assert dlq(pipeline, "purge", pending, "--reason", "later").exit_code == 0
    changed = pipeline.store.get_dlq_entry(pending)
    pipeline.execute("DELETE FROM dlq_entries")
    late = as_json(dlq(pipeline, "reindex", "--json"))

    # Then the rebuilt index has the change: the outbox's newest envelope counts
    assert late["from_outbox"] == 1
    assert pipeline.store.get_dlq_entry(pending) == changed
    assert late["by_status"] == {"PENDING_REVIEW": 2, "REPLAYED": 1, "RESOLVED": 2}


def test_a_replay_and_the_release_of_its_follower_carry_their_traceparent_and_submission_id(
    pipeline: Pipeline,
) -> None:
    # Given v1, published with a traceparent and a submission id, dead-lettered, and v2 (with
    # its own) that followed it to the DLQ
    pipeline.start_applier()
    v1 = dangling(pipeline, 1, document_id="doc-traced")
    v2 = walker(pipeline, "doc-traced", v1)
    for plan in (v1, v2):
        message = plan_message(plan, pipeline.settings.topics.plans, headers=work_headers_of(plan))
        pipeline.publish_raw(message.key or b"", message.value, dict(message.headers))
        pipeline.wait_stage(plan.operation_id, Stage.DEAD_LETTERED)
    ghosts(pipeline, 1)

    # When the entries are replayed
    result = dlq(pipeline, "replay-all")

    # Then v1's replay and v2's release each carry the headers their plan first came with
    assert result.exit_code == 0, result.output
    completed(pipeline, v1, v2)
    resent = wait_until(
        lambda: resent_work_headers(pipeline, count=2),
        timeout_s=30,
        what="the replay and the release on the plans topic",
    )
    assert resent == {plan.operation_id: work_headers_of(plan) for plan in (v1, v2)}


def resent_work_headers(p: Pipeline, *, count: int) -> dict[str, dict[str, str]] | None:
    """The work headers of each plan message replayed or released, by operation id, once there
    are ``count`` of them."""
    found = {
        headers[kafka_headers.OPERATION_ID].decode(): {
            name: headers.get(name, b"").decode()
            for name in (kafka_headers.TRACEPARENT, kafka_headers.SUBMISSION_ID)
        }
        for _key, _value, headers in read_to_end(p.settings, p.settings.topics.plans)
        if kafka_headers.DLQ_REPLAY in headers or kafka_headers.RELEASED in headers
    }
    return found if len(found) == count else None


# -- leaving the DLQ goes through its entry (issue 16 item 8) -----------------------------------


def test_resume_of_a_dead_lettered_operation_replays_its_entry_and_marks_it_replayed(
    pipeline: Pipeline,
) -> None:
    # Given a dead-lettered plan whose missing node exists now
    pipeline.start_applier()
    plan = dangling(pipeline, 1)
    entry = dead_lettered(pipeline, plan)[plan.operation_id]
    ghosts(pipeline, 1)

    # When the operation is resumed
    result = CliRunner(env=pipeline.env()).invoke(cli, ["resume", plan.operation_id, "--json"])

    # Then it went out as a replay of its entry: it completes and the entry says so
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dlq_id"] == entry.dlq_id
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    assert replays(pipeline) == {entry.dlq_id: 1}
    assert statuses(pipeline) == {entry.dlq_id: "REPLAYED"}
    envelope = decode_dlq_envelope(pipeline.store.get_dlq_entry(entry.dlq_id).envelope)  # type: ignore[union-attr]
    assert envelope.note is not None and "by resume" in envelope.note
    stats = as_json(dlq(pipeline, "stats", "--json"))
    assert stats["oldest_pending_age_s"] is None


def tier_copy(p: Pipeline, plan: IngestionPlan) -> None:
    """Publish a copy of ``plan`` on the first retry tier, due now, as a stray copy would be."""
    now = datetime.now(UTC)
    retry = RetryHeaders(
        attempt=2,
        due_at=now,
        original_topic=p.settings.topics.plans,
        original_partition=0,
        original_offset=0,
        first_failure_at=now,
        error_code=StatusCode.DEADLINE_EXCEEDED,
        error_class="GraphError",
        error_message="a copy that went astray",
        trace_id=new_trace_id(),
    )
    message = plan_message(plan, p.settings.topics.plans)
    producer = Producer(p.settings.kafka.producer_config())
    producer.produce(
        p.settings.topics.retry_tiers[0][0],
        key=message.key,
        value=message.value,
        headers=[*((k, v.encode()) for k, v in message.headers.items()), *retry.to_headers()],
    )
    assert producer.flush(30) == 0


def test_a_stray_tier_copy_of_a_dead_lettered_plan_is_dropped(pipeline: Pipeline) -> None:
    # Given a dead-lettered v1 whose missing node exists now
    pipeline.start_applier()
    v1 = dangling(pipeline, 1, document_id="doc-stray")
    entry = dead_lettered(pipeline, v1)[v1.operation_id]
    ghosts(pipeline, 1)

    # When a stray tier copy of it arrives, then (behind it, same partition) a tier copy of v2
    v2 = walker(pipeline, "doc-stray", v1)
    tier_copy(pipeline, v1)
    tier_copy(pipeline, v2)

    # Then the copy did not take v1 out of the DLQ: v2 finds it there and follows it
    def v2_settled() -> Stage | None:
        found = pipeline.store.get_operation(v2.operation_id)
        settled = found is not None and found.stage in (Stage.DEAD_LETTERED, Stage.COMPLETED)
        return found.stage if found and settled else None

    assert wait_until(v2_settled, timeout_s=60, what="v2 to settle") is Stage.DEAD_LETTERED
    assert pipeline.store.get_operation(v1.operation_id).stage is Stage.DEAD_LETTERED  # type: ignore[union-attr]
    assert statuses(pipeline)[entry.dlq_id] == "PENDING_REVIEW"
    assert pipeline.store.get_document_state(SPACE, "doc-stray") is None


# -- purging a leader never strands its followers (issue 16 item 5) -----------------------------


def leader_and_follower(p: Pipeline, document_id: str) -> tuple[IngestionPlan, IngestionPlan]:
    """A dead-lettered v1 and a v2 that followed it to the DLQ."""
    v1 = dangling(p, 1, document_id=document_id)
    dead_lettered(p, v1)
    v2 = walker(p, document_id, v1)
    dead_lettered(p, v2)
    return v1, v2


def leader_and_follower_entries(
    pipeline: Pipeline, document_id: str
) -> tuple[IngestionPlan, IngestionPlan, str, str]:
    """A real applier; v1 and v2 of ``document_id`` dead-lettered, v2 behind v1; their DLQ ids."""
    pipeline.start_applier()
    v1, v2 = leader_and_follower(pipeline, document_id)
    leader = pipeline.store.get_operation(v1.operation_id).dlq_id  # type: ignore[union-attr]
    follower = pipeline.store.get_operation(v2.operation_id).dlq_id  # type: ignore[union-attr]
    assert leader and follower
    return v1, v2, leader, follower


def test_purging_a_leader_is_refused_then_forced_its_followers_become_conflict(
    pipeline: Pipeline,
) -> None:
    # Given v1 in the DLQ and v2 behind it
    v1, v2, leader, follower = leader_and_follower_entries(pipeline, "doc-lead")

    # When v1's entry is purged without --force
    refused = dlq(pipeline, "purge", leader, "--reason", "bad extraction")

    # Then nothing changes: the purge names the version it would strand
    assert refused.exit_code == ExitCode.INVALID_INPUT, refused.output
    assert v2.operation_id in refused.stderr and "--force" in refused.stderr
    assert statuses(pipeline) == {leader: "PENDING_REVIEW", follower: "PENDING_REVIEW"}

    # When it is forced
    forced = as_json(
        dlq(pipeline, "purge", leader, "--reason", "bad extraction", "--force", "--json")
    )

    # Then both entries are resolved and v2 is a CONFLICT (to be replanned), not left waiting
    assert [c["operation_id"] for c in forced["conflicted"]] == [v2.operation_id]
    assert statuses(pipeline) == {leader: "RESOLVED", follower: "RESOLVED"}
    conflicted = pipeline.store.get_operation(v2.operation_id)
    assert conflicted is not None and conflicted.stage is Stage.CONFLICT
    assert conflicted.last_error is not None
    assert f"leader {v1.operation_id} purged" in conflicted.last_error.message

    # When v3, planned on v2's planned state, arrives after the purge
    v3 = walker(pipeline, "doc-lead", v2, "Walker 1 again.")
    pipeline.publish(v3)

    # Then it does not park behind the purged v1 for ever: it is a CONFLICT too
    pipeline.wait_stage(v3.operation_id, Stage.CONFLICT)


def test_recover_reports_a_parked_operation_whose_predecessor_is_gone(pipeline: Pipeline) -> None:
    # Given v2 parked for revision 1 of a document that nothing will bring to revision 1
    pipeline.start_applier()
    v1 = dangling(pipeline, 1, document_id="doc-orphan")
    v2 = walker(pipeline, "doc-orphan", v1)
    pipeline.publish(v2)
    pipeline.wait_stage(v2.operation_id, Stage.PARKED)

    # When recover runs
    runner = CliRunner(env=pipeline.env())
    text = runner.invoke(cli, ["recover", "--older-than", "0s"])
    shaped = runner.invoke(cli, ["recover", "--older-than", "0s", "--json"])

    # Then it reports v2 as stranded, in text and JSON, and exits 1
    assert text.exit_code == ExitCode.ERROR, text.output
    assert f"stranded {v2.operation_id} PARKED" in text.stdout, text.output
    assert shaped.exit_code == ExitCode.ERROR, shaped.output
    report = json.loads(shaped.stdout)
    assert [s["operation_id"] for s in report["stranded"]] == [v2.operation_id]
    assert report["summary"]["stranded"] == 1
