"""The read routes in process over a real pipeline and projector: a document and the errors
report answer what the CLI's ``doc show --json`` and ``errors report --json`` print, and
``?wait=`` right after the write side committed returns the final stage (read your writes)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.stages import Stage
from tests.integration.api_helpers import api_client, api_settings, ok, projected, projecting
from tests.integration.pipeline import Pipeline
from tests.integration.test_dlq_cli import SPACE, as_json, dangling, dead_lettered
from tests.samples import Entity, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_documents_and_errors_report_agree_with_the_cli_and_wait_reads_your_writes(
    pipeline: Pipeline,
) -> None:
    # Given a dead-lettered plan, folded by a projector beside the API
    settings = api_settings(pipeline)
    pipeline.start_applier()
    failed = dangling(pipeline, 0)
    dead_lettered(pipeline, failed)
    with projecting(settings), api_client(settings) as client:
        shown = projected(client, failed.operation_id, Stage.DEAD_LETTERED)

        # When a plan completes on the write side and is asked for at once with ?wait=
        done = sample_plan(
            SPACE, "doc-ok", "Ada.", [Entity("Person", "Ada")], [], graph=pipeline.graph
        )
        pipeline.publish(done)
        pipeline.wait_stage(done.operation_id, Stage.COMPLETED)
        answer = client.get(f"/api/v1/operations/{done.operation_id}", params={"wait": "30s"})

        # Then the answer is the final stage, and says it is current
        assert answer.status_code == 200, answer.text
        assert answer.json()["stage"] == "COMPLETED"
        assert answer.headers["Projection-Current"] == "true"
        for wait in ("500ms", "1"):
            again = client.get(f"/api/v1/operations/{done.operation_id}", params={"wait": wait})
            assert again.headers["Projection-Current"] == "true", wait
        path = f"/api/v1/operations/{done.operation_id}"
        assert client.get(path, params={"wait": "soon"}).status_code == 400

        # And the document reads as `doc show --json` prints it
        cli_runner = CliRunner(env=pipeline.env())
        for document in ("doc-ok", failed.document_id):
            printed = as_json(cli_runner.invoke(cli, ["doc", "show", SPACE, document, "--json"]))
            assert ok(client, f"/api/v1/documents/{SPACE}/{document}") == printed
        assert client.get(f"/api/v1/documents/{SPACE}/no-such-doc").status_code == 404

        # And the errors report as `errors report --json` prints it
        at = shown["transitions"][0]["at"]
        start, end = at[:10] + "T00:00:00+00:00", "2999-01-01T00:00:00+00:00"
        printed = as_json(
            cli_runner.invoke(cli, ["errors", "report", "--from", start, "--to", end, "--json"])
        )
        report = ok(client, "/api/v1/errors/report", **{"from": start, "to": end})
        assert report == printed
        assert report["groups"][0]["code"] == "FAILED_PRECONDITION"
        assert failed.operation_id in report["groups"][0]["example_operation_ids"]
        for bad in ({"from": end, "to": start}, {"from": "2026-12-01T00:00:00", "to": end}):
            assert client.get("/api/v1/errors/report", params=bad).status_code == 400, bad
        assert client.get("/api/v1/errors/report", params={"from": start}).status_code == 400
