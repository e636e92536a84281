"""Redrive tasks and the audit log over HTTP, in process, against a real applier: a filtered,
throttled task replays exactly the matching entries; a slow one is cancelled midway while a
second is refused with 409; the audit shows the starts, the cancel and a purge with who (the
token's name) and why; a task still running when the API stops is cancelled."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from graph_ingest.dlq.audit import AuditAction
from graph_ingest.store.audit import AuditQuery
from graph_ingest.waiting import wait_until
from tests.integration.api_helpers import AUTH, api_client, api_settings, ok
from tests.integration.pipeline import Pipeline
from tests.integration.test_dlq_cli import dangling, dead_lettered, ghosts, replays, statuses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPLAY_ALL = "/api/v1/dlq/messages/replay-all"


def started(client: TestClient, **body: Any) -> dict[str, Any]:
    """Start a task: 202, with a Location that shows it."""
    answer = client.post(REPLAY_ALL, json=body, headers=AUTH)
    assert answer.status_code == 202, answer.text
    task: dict[str, Any] = answer.json()
    assert answer.headers["Location"] == f"/api/v1/dlq/tasks/{task['task_id']}"
    return task


def ended(client: TestClient, task_id: str) -> dict[str, Any]:
    def shown() -> dict[str, Any] | None:
        task: dict[str, Any] = ok(client, f"/api/v1/dlq/tasks/{task_id}")
        return task if task["ended_at"] is not None else None

    return wait_until(shown, timeout_s=90, interval_s=0.2, what=f"task {task_id} to end")


def test_tasks_over_http_filter_throttle_cancel_refuse_a_second_and_are_audited(
    pipeline: Pipeline,
) -> None:
    # Given five dead-lettered plans in space "it" (their nodes made since) and one in "other"
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(5)]
    elsewhere = dangling(pipeline, 5, space="other")
    by_op = dead_lettered(pipeline, *plans, elsewhere)
    ghosts(pipeline, *range(5))
    ids = [by_op[p.operation_id].dlq_id for p in plans]
    other = by_op[elsewhere.operation_id].dlq_id

    with api_client(api_settings(pipeline)) as client:
        # When a dry run asks what the space's entries would be: 200, nothing changed
        dry = client.post(REPLAY_ALL, json={"space": "it", "dry_run": True}, headers=AUTH)
        assert dry.status_code == 200, dry.text
        assert (dry.json()["would_replay"], set(dry.json()["first_ids"])) == (5, set(ids))
        assert ok(client, "/api/v1/dlq/tasks")["tasks"] == []

        # When a task replays the ids given that are in space "it", at 2 per second
        clock = time.monotonic()
        first = started(
            client, space="it", ids=[*ids[:2], other], rate=2, reason="ghosts exist now"
        )
        done = ended(client, first["task_id"])

        # Then exactly those two went back, once each, no faster than the rate allows
        assert time.monotonic() - clock >= (2 - 1) / 2
        assert (done["status"], done["moved"], done["to_move"]) == ("COMPLETED", 2, 2)
        assert done["started_by"] == "alice" and done["filter"]["space"] == "it"
        assert replays(pipeline) == dict.fromkeys(ids[:2], 1)

        # When a slow task takes the rest and has moved one
        slow = started(client, space="it", rate=0.2)
        wait_until(
            lambda: ok(client, f"/api/v1/dlq/tasks/{slow['task_id']}")["moved"] >= 1,
            timeout_s=90,
            what="the slow task to move one entry",
        )

        # Then a second task is refused, naming it
        second = client.post(REPLAY_ALL, json={}, headers=AUTH)
        assert second.status_code == 409, second.text
        assert slow["task_id"] in second.json()["error"]["message"]

        # When it is cancelled midway
        path = f"/api/v1/dlq/tasks/{slow['task_id']}/cancel"
        assert client.post(path, json={"reason": "enough"}).status_code == 401
        cancel = client.post(path, json={"reason": "enough"}, headers=AUTH)
        assert cancel.status_code == 200, cancel.text

        # Then it stopped after the entry in hand: some of the rest moved, not all
        stopped = ended(client, slow["task_id"])
        assert stopped["status"] == "CANCELLED"
        moved = {d for d, s in statuses(pipeline).items() if s == "REPLAYED"} - set(ids[:2])
        assert 1 <= stopped["moved"] == len(moved) < 3 and moved <= set(ids[2:])
        listed = [t["task_id"] for t in ok(client, "/api/v1/dlq/tasks")["tasks"]]
        assert listed == [slow["task_id"], first["task_id"]]

        # When the other space's entry is purged
        purge = client.delete(
            f"/api/v1/dlq/messages/{other}", params={"reason": "wrong space"}, headers=AUTH
        )
        assert purge.status_code == 200, purge.text

        # Then the audit shows both starts, the cancel and the purge, with who and why
        trail = [
            (a["action"], a["by"], a["target"], a["reason"])
            for a in ok(client, "/api/v1/audit")["entries"]
        ]
        assert trail == [
            ("dlq.redrive.start", "alice", [first["task_id"]], "ghosts exist now"),
            ("dlq.redrive.start", "alice", [slow["task_id"]], None),
            ("dlq.redrive.cancel", "alice", [slow["task_id"]], "enough"),
            ("dlq.purge", "alice", [other], "wrong space"),
        ]
        purges = ok(client, "/api/v1/audit", action="dlq.purge")["entries"]
        assert [a["target"] for a in purges] == [[other]]
        assert ok(client, "/api/v1/audit", since="2999-01-01T00:00:00Z")["entries"] == []
        assert (
            client.get("/api/v1/audit", params={"since": "2026-12-01T00:00:00"}).status_code == 400
        )
        assert client.get("/api/v1/dlq/tasks/task-0000000000000000").status_code == 404


def test_a_task_still_running_when_the_api_stops_is_cancelled_and_audited(
    pipeline: Pipeline,
) -> None:
    # Given a task that has moved one of two entries and waits 100 s for its next turn
    pipeline.start_applier()
    plans = [dangling(pipeline, i) for i in range(2)]
    by_op = dead_lettered(pipeline, *plans)
    settings = api_settings(pipeline)
    with api_client(settings) as client:
        task = started(client, rate=0.01)
        wait_until(
            lambda: ok(client, f"/api/v1/dlq/tasks/{task['task_id']}")["moved"] >= 1,
            timeout_s=90,
            what="the task to move one entry",
        )

    # When the API has stopped (its lifespan ended)
    # Then the task ended CANCELLED, its second entry not replayed, and the cancel is audited
    stopped = pipeline.store.get_redrive_task(task["task_id"])
    assert stopped is not None and stopped.status == "CANCELLED"
    assert stopped.progress.moved == 1
    (replayed,) = replays(pipeline)
    assert replayed in {e.dlq_id for e in by_op.values()}
    cancels = [
        (a.record.actor, a.record.reason)
        for a in pipeline.store.list_audit(AuditQuery(action=AuditAction.REDRIVE_CANCEL))
    ]
    assert cancels == [("graph-ingest serve", "the API shut down")]
