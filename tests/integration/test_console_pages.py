"""The console's pages in-process (``TestClient``) over real PostgreSQL and Kafka: what a browser
test would be slow to walk. A purge's confirmation names the versions it strands, the purge is
refused until forced; without a token, or with none configured, an action is refused with the
API's own message; bad filters and unknown ids are pages that say so, never a 500; the console
is not in the API's OpenAPI document."""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote_plus

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from graph_ingest.api.app import create_app
from graph_ingest.api.auth import NOT_CONFIGURED
from graph_ingest.api.console.tokens import COOKIE
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import postgres_store
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings
from tests.integration.test_dlq_cli import (
    dangling,
    dead_lettered,
    ghosts,
    leader_and_follower,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOKEN_NAME, TOKEN = "oncall", "s3cret-console-token"


def with_tokens(settings: Settings, tokens: dict[str, str]) -> Settings:
    secrets = {name: SecretStr(token) for name, token in tokens.items()}
    return settings.model_copy(update={"api": settings.api.model_copy(update={"tokens": secrets})})


@contextmanager
def console(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, postgres_store), follow_redirects=False) as client:
        yield client


def test_a_purge_shows_what_it_strands_is_refused_then_forced_as_the_token_owner(
    pipeline: Pipeline,
) -> None:
    # Given v1 in the DLQ and v2 behind it
    pipeline.start_applier()
    v1, v2 = leader_and_follower(pipeline, "doc-lead")
    leader = pipeline.store.get_operation(v1.operation_id).dlq_id  # type: ignore[union-attr]
    assert leader is not None
    with console(with_tokens(pipeline.settings, {TOKEN_NAME: TOKEN})) as client:
        # When the operator lists the DLQ: both entries, and the counts
        listed = client.get("/ui/dlq", params={"status": "pending_review", "document": "doc-lead"})
        assert listed.status_code == 200, listed.text
        assert listed.text.count('data-status="PENDING_REVIEW"') == 2
        assert "DLQ: 2 entries: 2 PENDING_REVIEW, 0 REPLAYED, 0 RESOLVED" in listed.text

        # When the operator asks to purge v1's entry: the confirmation names v2
        page = client.get(f"/ui/dlq/{leader}/purge")
        assert page.status_code == 200, page.text
        assert "1 later version(s) wait behind it and would be stranded" in page.text
        assert f"{v2.operation_id} (DEAD_LETTERED)" in page.text

        # Then without a token the purge is refused with the API's message, nothing changed
        refused = client.post(f"/ui/dlq/{leader}/purge", data={"reason": "bad extraction"})
        assert refused.status_code == 401, refused.text
        assert "send Authorization: Bearer" in refused.text

        # When they give their token and purge without forcing: refused, naming v2
        saved = client.post("/ui/token", data={"token": TOKEN, "next": f"/ui/dlq/{leader}/purge"})
        assert (saved.status_code, saved.headers["location"]) == (303, f"/ui/dlq/{leader}/purge")
        assert "httponly" in saved.headers["set-cookie"].lower()
        refused = client.post(f"/ui/dlq/{leader}/purge", data={"reason": "bad extraction"})
        assert refused.status_code == 409, refused.text
        assert v2.operation_id in refused.text
        assert pipeline.store.get_dlq_entry(leader).status is DlqStatus.PENDING_REVIEW  # type: ignore[union-attr]

        # and forced: RESOLVED with the reason and who, v2 moved to CONFLICT
        done = client.post(
            f"/ui/dlq/{leader}/purge", data={"reason": "bad extraction", "force": "true"}
        )
        assert done.status_code == 303, done.text
        shown = client.get(done.headers["location"])
        assert f"purged by {TOKEN_NAME}; moved to CONFLICT: {v2.operation_id}" in shown.text
    purged = pipeline.store.get_dlq_entry(leader)
    assert purged is not None and purged.status is DlqStatus.RESOLVED
    assert pipeline.store.get_operation(v2.operation_id).stage is Stage.CONFLICT  # type: ignore[union-attr]


def test_without_a_configured_token_actions_are_refused_with_the_api_message(
    pipeline: Pipeline,
) -> None:
    with console(with_tokens(pipeline.settings, {})) as client:
        form = client.get("/ui/token")
        assert NOT_CONFIGURED in html.unescape(form.text)

        saved = client.post("/ui/token", data={"token": "anything", "next": "/ui"})
        assert saved.status_code == 403
        assert "set-cookie" not in saved.headers

        # (the action itself checks the cookie with the API's require_token: see the purge test)


def test_bad_input_is_a_page_that_says_so_and_the_console_is_not_in_the_openapi(
    pipeline: Pipeline,
) -> None:
    with console(pipeline.settings) as client:
        bad_stage = client.get("/ui", params={"stage": "DONE"})
        assert bad_stage.status_code == 400
        assert "stage must be one of PREPARED" in bad_stage.text
        bad_cursor = client.get("/ui", params={"cursor": "nonsense"})
        assert bad_cursor.status_code == 400
        assert "not a cursor this service gave out" in bad_cursor.text
        assert client.get("/ui/dlq", params={"code": "nope"}).status_code == 400
        unknown = client.get("/ui/dlq/dlq-nope")
        assert unknown.status_code == 404 and "DLQ entry dlq-nope not found" in unknown.text
        assert client.get("/ui/dlq/dlq-nope/replay").status_code == 404
        assert client.get("/ui/operations/op-nope").status_code == 404
        assert (
            client.get("/ui/static/console.js")
            .headers["content-type"]
            .startswith("text/javascript")
        )
        assert client.get("/ui/static/../app.py").status_code == 404
        # a next that leaves the console is not followed
        saved = client.post("/ui/token", data={"token": "x", "next": "https://evil.example/"})
        assert saved.status_code in (401, 403)
        assert 'value="/ui"' in saved.text
        projections = client.get("/ui/projections")
        assert projections.status_code == 200, projections.text
        assert 'data-projection="operation_status"' in projections.text
        paths = client.get("/openapi.json").json()["paths"]
        assert not [path for path in paths if path.startswith("/ui")]


def test_a_redrive_task_from_the_dlq_filters_refuses_a_second_and_is_cancelled(
    pipeline: Pipeline,
) -> None:
    # Given two plans in the DLQ, and the nodes they missed created since
    pipeline.start_applier()
    entries = dead_lettered(pipeline, dangling(pipeline, 1), dangling(pipeline, 2))
    ghosts(pipeline, 1, 2)
    with console(with_tokens(pipeline.settings, {TOKEN_NAME: TOKEN})) as client:
        # When the operator asks to replay all entries of that code: the dry run names both
        filters = {"code": "FAILED_PRECONDITION", "status": "PENDING_REVIEW"}
        page = client.get("/ui/dlq/tasks/new", params=filters)
        assert page.status_code == 200, page.text
        assert "2 entries would be replayed" in page.text
        assert all(e.dlq_id in page.text for e in entries.values())
        assert 'id="needs-token"' in page.text
        start = {"code": "FAILED_PRECONDITION", "rate": "0.05", "reason": "nodes exist now"}
        # Then without a token it is refused with the API's message, no task started
        refused = client.post("/ui/dlq/tasks/new", data=start)
        assert refused.status_code == 401 and "send Authorization: Bearer" in refused.text
        client.post("/ui/token", data={"token": TOKEN, "next": "/ui/dlq/tasks"})
        # and a bad rate or no reason is said on the confirmation page
        bad_rate = client.post("/ui/dlq/tasks/new", data={**start, "rate": "fast"})
        assert bad_rate.status_code == 400
        assert "the rate is entries per second" in html.unescape(bad_rate.text)
        assert client.post("/ui/dlq/tasks/new", data={**start, "reason": " "}).status_code == 409
        assert "No redrive task has run yet" in client.get("/ui/dlq/tasks").text

        # When it starts (slowly: one entry per 20 s), a second one is refused, naming the first
        started = client.post("/ui/dlq/tasks/new", data=start)
        assert started.status_code == 303, started.text
        notice = unquote_plus(started.headers["location"])
        assert f"started by {TOKEN_NAME}: 2 to move" in notice
        task_id = notice.split("notice=task ")[1].split()[0]
        listed = client.get("/ui/dlq/tasks")
        second = client.post("/ui/dlq/tasks/new", data=start)
        assert second.status_code == 409, second.text
        assert f"{task_id}" in second.text and "one redrive at a time" in second.text

        # Then the list offers to cancel it; without the token that is refused
        assert f'action="/ui/dlq/tasks/{task_id}/cancel"' in listed.text
        token = client.cookies.get(COOKIE)
        client.cookies.clear()
        anonymous = client.post(f"/ui/dlq/tasks/{task_id}/cancel")
        assert anonymous.status_code == 401 and "send Authorization: Bearer" in anonymous.text
        # and with it the task stops: CANCELLED, the entry not reached still PENDING_REVIEW
        client.cookies.set(COOKIE, token or "", path="/ui")
        cancelled = client.post(f"/ui/dlq/tasks/{task_id}/cancel")
        assert cancelled.status_code == 303, cancelled.text
        assert "CANCELLING" in unquote_plus(cancelled.headers["location"])
        wait_until(
            lambda: (
                f'data-task="{task_id}" data-status="CANCELLED"' in client.get("/ui/dlq/tasks").text
            ),
            timeout_s=60,
            what="the task CANCELLED",
        )
        assert client.post("/ui/dlq/tasks/task-nope/cancel").status_code == 404
    statuses = sorted(
        pipeline.store.get_dlq_entry(e.dlq_id).status  # type: ignore[union-attr]
        for e in entries.values()
    )
    assert statuses == [DlqStatus.PENDING_REVIEW, DlqStatus.REPLAYED]


def test_the_timeline_shows_the_failure_ids_and_the_parked_chain_and_the_dlq_list_pages(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given v1 in the DLQ and v2 behind it, folded by a projector
    settings = projector_settings(pipeline)
    pipeline.start_applier()
    pipeline.start_projector(settings)
    v1, v2 = leader_and_follower(pipeline, "doc-chain")
    leader = pipeline.store.get_operation(v1.operation_id)
    assert leader is not None and leader.last_error is not None and leader.dlq_id
    with console(settings) as client:
        # When the operator opens v2 (once the projector has folded it behind v1, and v1's
        # entry: the chain links it)
        page = wait_until(
            lambda: _shown(client, f"/ui/operations/{v2.operation_id}", f"/ui/dlq/{leader.dlq_id}"),
            timeout_s=60,
            what="v2's parked-behind chain",
        )
        # Then it names its plan kind and links what it waits behind, with its DLQ entry
        assert 'id="plan-kind">INGESTION<' in page
        chain = page.split('id="parked-chain"')[1].split("</ol>")[0]
        assert f'href="/ui/operations/{v1.operation_id}"' in chain
        assert "DEAD_LETTERED, DLQ" in chain and leader.dlq_id in chain
        # and v1's timeline shows the failure its step recorded, with its error and trace ids
        first = client.get(f"/ui/operations/{v1.operation_id}").text
        timeline = first.split('id="timeline"')[1].split("</table>")[0]
        assert leader.last_error.error_id and leader.last_error.error_id in timeline
        assert leader.last_error.trace_id and leader.last_error.trace_id in timeline

        # When the DLQ list pages one entry at a time: the oldest, then the next, then none
        monkeypatch.setattr("graph_ingest.api.console.views.DLQ_PAGE", 1)
        listed = client.get("/ui/dlq", params={"document": "doc-chain"}).text
        assert listed.count("data-dlq=") == 1 and leader.dlq_id in listed
        following = html.unescape(listed.split('id="next-page" href="')[1].split('"')[0])
        second = client.get(f"/ui/dlq{following}").text
        assert second.count("data-dlq=") == 1 and leader.dlq_id not in second
        assert 'id="next-page"' not in second


def _shown(client: TestClient, path: str, wanted: str) -> str | None:
    page = client.get(path)
    return page.text if page.status_code == 200 and wanted in page.text else None
