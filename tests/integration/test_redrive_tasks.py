"""Redrive tasks and the audit log end to end: a real applier dead-letters plans of several codes
and spaces; `dlq replay-all` replays them as a task that is filtered, throttled, one at a time,
cancellable from another process, and audited.

DLQ entries are made as in test_dlq_cli: a plan whose edge points at a missing node fails
FAILED_PRECONDITION; a message that is no plan fails INVALID_ARGUMENT.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.dlq.audit import Audit
from graph_ingest.dlq.replayer import DlqReplayer
from graph_ingest.dlq.tasks import DryRun, RedriveTasks
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.store.dlq_index import DlqQuery
from graph_ingest.store.redrive_tasks import NewTask
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_dlq_cli import (
    as_json,
    completed,
    dangling,
    dead_lettered,
    dlq,
    ghosts,
    replay_all_process,
    replays,
    statuses,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


IT_PRECONDITION = ("--space", "it", "--code", "FAILED_PRECONDITION")


def dry_run(p: Pipeline, selection: DlqQuery) -> DryRun:
    """What the task service (as the API calls it) says a task would do."""
    producer = KafkaProducer(p.settings.kafka)
    try:
        replayer = DlqReplayer(p.store, producer, p.settings)
        redrive = RedriveTasks(p.store, replayer, Audit(p.store), dlq_topic=p.settings.topics.dlq)
        return redrive.dry_run(selection)
    finally:
        producer.close()


def audit(p: Pipeline, *args: str) -> list[dict[str, Any]]:
    result = CliRunner(env=p.env()).invoke(cli, ["audit", "--json", *args])
    entries: list[dict[str, Any]] = as_json(result)["entries"]
    return entries


def tasks(p: Pipeline) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = as_json(dlq(p, "tasks", "--json"))["tasks"]
    return found


def pending(p: Pipeline) -> set[str]:
    return {d for d, s in statuses(p).items() if s == DlqStatus.PENDING_REVIEW}


def test_a_filtered_throttled_task_replays_exactly_the_matching_entries(pipeline: Pipeline) -> None:
    # Given three dead-lettered plans in space "it", one in space "other", and one non-plan
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(3)]
    elsewhere = dangling(pipeline, 3, space="other")
    by_op = dead_lettered(pipeline, *plans, elsewhere)
    pipeline.publish_raw(b"it/doc-junk", b"\x00not a plan")
    pipeline.dlq_entries(5)
    ghosts(pipeline, *range(3))
    matching = {by_op[p.operation_id].dlq_id for p in plans}

    # When a dry run looks first: it counts and names them, and changes nothing
    dry = as_json(dlq(pipeline, "replay-all", *IT_PRECONDITION, "--dry-run", "--json"))
    assert {e["dlq_id"] for e in dry["entries"] if e["action"] == "would-replay"} == matching
    assert pending(pipeline) == set(statuses(pipeline)) and tasks(pipeline) == []
    preview = dry_run(pipeline, DlqQuery(space="it", code=StatusCode.FAILED_PRECONDITION))
    assert (preview.would_replay, preview.refused, set(preview.first_ids)) == (3, 0, matching)

    # When a task replays the space's FAILED_PRECONDITION entries at 2 per second
    started = time.monotonic()
    result = dlq(
        pipeline,
        "replay-all",
        *IT_PRECONDITION,
        *("--rate", "2", "--by", "alice", "--reason", "ghosts exist now", "--json"),
    )
    took = time.monotonic() - started

    # Then exactly those went back, once each, no faster than the rate allows
    report = as_json(result)
    assert {e["dlq_id"] for e in report["entries"] if e["action"] == "replayed"} == matching
    assert took >= (3 - 1) / 2
    assert replays(pipeline) == dict.fromkeys(matching, 1)
    assert pending(pipeline) == set(statuses(pipeline)) - matching  # the others untouched
    completed(pipeline, *plans)
    (task,) = tasks(pipeline)
    assert (task["status"], task["moved"], task["to_move"], task["refused"]) == (
        "COMPLETED",
        3,
        3,
        0,
    )
    assert task["filter"] == {"code": "FAILED_PRECONDITION", "space": "it"}
    assert task["started_by"] == "alice" and task["rate"] == 2
    (start,) = audit(pipeline, "--action", "dlq.redrive.start")
    assert (start["by"], start["target"], start["reason"]) == (
        "alice",
        [task["task_id"]],
        "ghosts exist now",
    )
    assert start["details"]["filter"] == task["filter"]


def test_a_task_is_cancelled_from_another_process_and_a_second_one_is_refused_meanwhile(
    pipeline: Pipeline,
) -> None:
    # Given five dead-lettered plans ready to replay
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(5)]
    by_op = dead_lettered(pipeline, *plans)
    ghosts(pipeline, *range(5))
    every = {e.dlq_id for e in by_op.values()}

    # When a slow task runs in its own process and has moved one
    run = replay_all_process(pipeline, "--rate", "0.25", "--by", "alice")
    try:
        wait_until(
            lambda: tasks(pipeline) and tasks(pipeline)[0]["moved"] >= 1,
            timeout_s=90,
            what="the task to move one entry",
        )
        (running,) = tasks(pipeline)
        task_id = running["task_id"]

        # Then a second task is refused, naming the one that runs
        second = dlq(pipeline, "replay-all", "--by", "carol")
        assert second.exit_code == ExitCode.INVALID_INPUT, second.output
        assert f"task {task_id} (RUNNING" in second.stderr

        # When another process cancels it
        cancel = dlq(
            pipeline, "task", "cancel", task_id, "--by", "bob", "--reason", "enough", "--json"
        )
        assert as_json(cancel)["status"] in ("CANCELLING", "CANCELLED")
        _, stderr = run.communicate(timeout=90)
    finally:
        run.kill()

    # Then it stopped after the entry in hand: CANCELLED, some moved, the rest untouched
    assert run.returncode == ExitCode.INTERRUPTED, stderr.decode()
    ended = as_json(dlq(pipeline, "task", "show", task_id, "--json"))
    assert ended["status"] == "CANCELLED" and ended["ended_at"] is not None
    moved = every - pending(pipeline)
    assert 1 <= ended["moved"] == len(moved) < 5
    assert replays(pipeline) == dict.fromkeys(moved, 1)

    # When a new task replays the rest, it goes on where the first stopped
    rest = as_json(dlq(pipeline, "replay-all", "--by", "carol", "--json"))
    assert {e["dlq_id"] for e in rest["entries"]} == every - moved
    completed(pipeline, *plans)

    # Then the audit shows both tasks and the cancel, in order, with who and why
    trail = [(a["action"], a["by"], a["target"]) for a in audit(pipeline)]
    newest = tasks(pipeline)[0]["task_id"]
    assert trail == [
        ("dlq.redrive.start", "alice", [task_id]),
        ("dlq.redrive.cancel", "bob", [task_id]),
        ("dlq.redrive.start", "carol", [newest]),
    ]
    assert audit(pipeline, "--action", "dlq.redrive.cancel")[0]["reason"] == "enough"
    text = CliRunner(env=pipeline.env()).invoke(cli, ["audit"]).stdout.splitlines()
    assert [line.split()[1:3] for line in text] == [
        ["dlq.redrive.start", "alice"],
        ["dlq.redrive.cancel", "bob"],
        ["dlq.redrive.start", "carol"],
    ]


def test_a_task_whose_runner_died_does_not_block_the_next(pipeline: Pipeline) -> None:
    # Given a RUNNING task whose runner stopped beating an hour ago (its process died)
    dead = pipeline.store.insert_redrive_task(
        NewTask("task-dead", pipeline.settings.topics.dlq, {}, None, "ghost", None, 3),
        stale_after_s=30,
    )
    pipeline.execute(
        "UPDATE redrive_tasks SET heartbeat_at = now() - interval '1 hour' WHERE task_id = %s",
        dead.task_id,
    )

    # When a new task starts
    result = dlq(pipeline, "replay-all", "--json")

    # Then it runs, and the dead one is ended FAILED with the reason
    assert result.exit_code == 0, result.output
    shown = as_json(dlq(pipeline, "task", "show", dead.task_id, "--json"))
    assert shown["status"] == "FAILED" and "its runner stopped" in shown["error"]
    assert Counter(t["status"] for t in tasks(pipeline)) == {"FAILED": 1, "COMPLETED": 1}
    text = dlq(pipeline, "task", "show", dead.task_id).stdout
    assert f"task        {dead.task_id}  FAILED" in text and "its runner stopped" in text
    assert dead.task_id in dlq(pipeline, "tasks").stdout


def test_a_replay_that_fails_again_counts_a_repeat_failure_and_replay_and_purge_are_audited(
    pipeline: Pipeline,
) -> None:
    # Given a dead-lettered plan whose missing node still does not exist
    pipeline.start_applier()
    plan = dangling(pipeline, 1)
    entry = dead_lettered(pipeline, plan)[plan.operation_id]
    assert as_json(dlq(pipeline, "show", entry.dlq_id, "--json"))["repeat_failures"] == 0

    # When it is replayed and fails again
    replayed = dlq(pipeline, "replay", entry.dlq_id, "--by", "dave", "--reason", "try again")
    assert replayed.exit_code == 0, replayed.output
    wait_until(
        lambda: (
            (e := pipeline.store.get_dlq_entry(entry.dlq_id)) is not None
            and e.attempts > entry.attempts
            and e.status is DlqStatus.PENDING_REVIEW
        ),
        timeout_s=60,
        what="the replay to fail again",
    )

    # Then the entry counts one repeat failure, in JSON and in text
    assert as_json(dlq(pipeline, "show", entry.dlq_id, "--json"))["repeat_failures"] == 1
    assert "repeat failures 1" in " ".join(dlq(pipeline, "show", entry.dlq_id).stdout.split())

    # When it is purged; then the audit holds the replay and the purge with who and why
    purged = dlq(pipeline, "purge", entry.dlq_id, "--reason", "Ghost 1 never comes", "--by", "eve")
    assert purged.exit_code == 0, purged.output
    trail = [(a["action"], a["by"], a["target"], a["reason"]) for a in audit(pipeline)]
    assert trail == [
        ("dlq.replay", "dave", [entry.dlq_id], "try again"),
        ("dlq.purge", "eve", [entry.dlq_id], "Ghost 1 never comes"),
    ]
    since_later = audit(pipeline, "--since", "2999-01-01T00:00:00Z")
    assert since_later == []
