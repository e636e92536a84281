"""The HTTP API in process over a real pipeline (Kafka, Neo4j, PostgreSQL) and a projector:
every endpoint agrees with the write side after a run with a dead-lettered plan; a replay
through the API completes the operation; a purge that would strand followers is refused
without ``force``; changes need a token."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from graph_ingest.dlq import views
from graph_ingest.dlq.audit import AuditAction
from graph_ingest.domain.stages import Stage
from graph_ingest.store.audit import AuditQuery
from graph_ingest.waiting import wait_until
from tests.integration.api_helpers import (
    AUTH,
    api_client,
    api_settings,
    ok,
    projected,
    projecting,
)
from tests.integration.pipeline import Pipeline
from tests.integration.test_dlq_cli import (
    SPACE,
    dangling,
    dead_lettered,
    ghosts,
    leader_and_follower_entries,
    statuses,
)
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DLQ = "/api/v1/dlq/messages"


def all_pages(client: TestClient, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a cursor-paginated listing, a page of 1 at a time."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = ok(client, path, limit=1, **params, **({"cursor": cursor} if cursor else {}))
        items.extend(page[key])
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def without_age(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name != "age_s"}


def test_every_endpoint_agrees_with_the_write_side_and_a_replay_completes(
    pipeline: Pipeline,
) -> None:
    # Given a completed plan and one dead-lettered (its edge points at a missing node)
    settings = api_settings(pipeline)
    pipeline.start_applier()
    done = sample_plan(SPACE, "doc-ok", "Ada.", [Entity("Person", "Ada")], [], graph=pipeline.graph)
    pipeline.publish(done)
    pipeline.wait_stage(done.operation_id, Stage.COMPLETED)
    failed = dangling(pipeline, 0)
    entry = dead_lettered(pipeline, failed)[failed.operation_id]

    with projecting(settings), api_client(settings) as client:
        # Then each operation reads as the write side has it
        for plan, stage in ((done, Stage.COMPLETED), (failed, Stage.DEAD_LETTERED)):
            shown = projected(client, plan.operation_id, stage)
            stored = pipeline.store.get_operation(plan.operation_id)
            assert stored is not None
            assert (shown["sequence"], shown["attempts"], shown["dlq_id"]) == (
                stored.sequence,
                stored.attempts,
                stored.dlq_id,
            )
            assert shown["transitions"][-1]["stage"] == stage.value
        assert (
            projected(client, failed.operation_id, Stage.DEAD_LETTERED)["last_error"]["code"]
            == entry.code.value
        )

        # and the listing pages through every operation once, filters included
        listed = all_pages(client, "/api/v1/operations", "operations")
        assert sorted(o["operation_id"] for o in listed) == sorted(
            [done.operation_id, failed.operation_id]
        )
        dead = ok(client, "/api/v1/operations", stage="DEAD_LETTERED")["operations"]
        assert [o["operation_id"] for o in dead] == [failed.operation_id]
        mine = ok(client, "/api/v1/operations", space=SPACE, document="doc-ok")["operations"]
        assert [o["operation_id"] for o in mine] == [done.operation_id]
        assert ok(client, "/api/v1/operations", older_than=3600)["operations"] == []
        assert client.get("/api/v1/operations", params={"cursor": "nonsense"}).status_code == 400
        assert client.get("/api/v1/operations/op_unknown").status_code == 404

        # and the projection has caught up
        wait_until(
            lambda: ok(client, "/api/v1/projections")[0]["state"] == "idle",
            timeout_s=60,
            interval_s=0.5,
            what="the projection to be idle",
        )
        check_dlq_reads(pipeline, client, entry.dlq_id, failed.operation_id)

        # When a change comes without a token, or a wrong one: 401, nothing replayed
        body = {"reason": "Ghost 0 exists now"}
        assert client.post(f"{DLQ}/{entry.dlq_id}/replay", json=body).status_code == 401
        wrong = {"Authorization": "Bearer not-a-token-of-anyone"}
        assert (
            client.post(f"{DLQ}/{entry.dlq_id}/replay", json=body, headers=wrong).status_code == 401
        )
        assert statuses(pipeline) == {entry.dlq_id: "PENDING_REVIEW"}

        # When the missing node exists and the entry is replayed through the API
        ghosts(pipeline, 0)
        replayed = client.post(f"{DLQ}/{entry.dlq_id}/replay", json=body, headers=AUTH)

        # Then it is marked REPLAYED and the operation completes, as the API shows
        assert replayed.status_code == 200, replayed.text
        assert (replayed.json()["action"], replayed.json()["status"]) == ("replayed", "REPLAYED")
        replays = pipeline.store.list_audit(AuditQuery(action=AuditAction.DLQ_REPLAY))
        assert [(a.record.actor, a.record.target, a.record.reason) for a in replays] == [
            ("alice", (entry.dlq_id,), "Ghost 0 exists now")
        ]
        projected(client, failed.operation_id, Stage.COMPLETED)
        assert ok(client, f"{DLQ}/{entry.dlq_id}")["status"] == "REPLAYED"
        again = client.post(f"{DLQ}/{entry.dlq_id}/replay", json=body, headers=AUTH)
        assert again.status_code == 409, again.text
        assert "--force" in again.json()["error"]["message"]


def check_dlq_reads(pipeline: Pipeline, client: TestClient, dlq_id: str, operation_id: str) -> None:
    """The DLQ endpoints show what the DLQ index holds (the CLI's JSON shapes)."""
    now = pipeline.store.database_time()
    stored = pipeline.store.get_dlq_entry(dlq_id)
    assert stored is not None
    listed = ok(client, DLQ)["entries"]
    requests = pipeline.settings.topics.requests
    expected = views.entry_json(stored, now, requests_topic=requests)
    assert [without_age(e) for e in listed] == [without_age(expected)]
    at = stored.dead_lettered_at
    for selects, filters in (
        (True, {"status": "PENDING_REVIEW", "code": stored.code.value, "space": SPACE}),
        (
            True,
            {
                "class": stored.error_class,
                "from": at.isoformat(),
                "to": (at + timedelta(seconds=1)).isoformat(),
            },
        ),
        (False, {"class": "NoSuchError"}),
        (False, {"status": "RESOLVED"}),
        (False, {"from": (at + timedelta(seconds=1)).isoformat()}),
        (False, {"to": at.isoformat()}),
    ):
        found = [e["dlq_id"] for e in ok(client, DLQ, **filters)["entries"]]
        assert found == ([dlq_id] if selects else []), filters
    assert client.get(DLQ, params={"from": "2026-12-01T09:30:00"}).status_code == 400
    cursor = base64.urlsafe_b64encode(orjson.dumps([at.isoformat(), dlq_id])).decode()
    assert ok(client, DLQ, cursor=cursor)["entries"] == []

    detail = ok(client, f"{DLQ}/{dlq_id}")
    assert (detail["operation_id"], detail["operation_stage"]) == (operation_id, "DEAD_LETTERED")
    assert detail["plan"]["decodes"] is True
    assert len(detail["envelope"]["attempts"]) == stored.attempts
    assert client.get(f"{DLQ}/dlq-000000000000000000000000").status_code == 404
    assert client.get(f"{DLQ}/not-an-id").status_code == 400

    stats = ok(client, "/api/v1/dlq/stats")
    expected = views.stats_json(pipeline.store.dlq_stats())
    assert {k: v for k, v in stats.items() if k != "oldest_pending_age_s"} == {
        k: v for k, v in expected.items() if k != "oldest_pending_age_s"
    }


def test_a_purge_that_would_strand_a_follower_is_refused_without_force(
    pipeline: Pipeline,
) -> None:
    # Given v1 in the DLQ and v2 behind it
    _v1, v2, leader, follower = leader_and_follower_entries(pipeline, "doc-lead")
    with api_client(api_settings(pipeline)) as client:
        # When v1's entry is purged without force (and once without a reason)
        path = f"{DLQ}/{leader}"
        unexplained = client.delete(path, headers=AUTH)
        assert unexplained.status_code == 422, unexplained.text
        assert "dlq.purge needs a reason" in unexplained.json()["error"]["message"]
        refused = client.delete(path, params={"reason": "bad extraction"}, headers=AUTH)

        # Then it is refused with 409 naming v2, and nothing changes
        assert refused.status_code == 409, refused.text
        assert v2.operation_id in refused.json()["error"]["message"]
        assert statuses(pipeline) == {leader: "PENDING_REVIEW", follower: "PENDING_REVIEW"}

        # When it is forced: both resolved, v2 a CONFLICT, the reason and who kept
        forced = client.delete(
            path, params={"reason": "bad extraction", "force": "true"}, headers=AUTH
        )
        assert forced.status_code == 200, forced.text
        assert [c["operation_id"] for c in forced.json()["conflicted"]] == [v2.operation_id]
        assert forced.json()["note"] == "bad extraction (purged by alice through the API)"
        assert statuses(pipeline) == {leader: "RESOLVED", follower: "RESOLVED"}
        assert client.delete(path, params={"reason": "again"}, headers=AUTH).status_code == 409

        # and the audit records the one purge made, with who and why
        purges = pipeline.store.list_audit(AuditQuery(action=AuditAction.DLQ_PURGE))
        assert [(a.record.actor, a.record.target, a.record.reason) for a in purges] == [
            ("alice", (leader,), "bad extraction")
        ]
        assert purges[0].record.details["conflicted"] == [v2.operation_id]


def test_with_no_token_configured_every_change_is_refused_with_403(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    failed = dangling(pipeline, 0)
    dlq_id = dead_lettered(pipeline, failed)[failed.operation_id].dlq_id
    with api_client(api_settings(pipeline, tokens={})) as client:
        for answer in (
            client.post(f"{DLQ}/{dlq_id}/replay", json={"reason": "r"}, headers=AUTH),
            client.delete(f"{DLQ}/{dlq_id}", params={"reason": "r"}, headers=AUTH),
            client.post(f"{DLQ}/replay-all", json={}, headers=AUTH),
            client.post("/api/v1/dlq/tasks/task-0000000000000000/cancel", headers=AUTH),
            client.post("/admin/circuit-breaker/neo4j/force-open", headers=AUTH),
        ):
            assert answer.status_code == 403, answer.text
            assert "GRAPH_INGEST_API__TOKENS" in answer.json()["error"]["message"]
        assert statuses(pipeline) == {dlq_id: "PENDING_REVIEW"}
