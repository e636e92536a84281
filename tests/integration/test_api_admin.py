"""The admin API in process against real Kafka and PostgreSQL: forcing a breaker over HTTP is
what `breaker status` and every worker read (the control topic), and the audit records it with
the token's name and the reason; an unknown dependency is 404 naming the known ones."""

from __future__ import annotations

import pytest

from graph_ingest.domain.breaker_control import BreakerMode
from graph_ingest.kafka.control import read_controls
from tests.integration.api_helpers import AUTH, api_client, api_settings, ok
from tests.integration.pipeline import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BREAKERS = "/admin/circuit-breaker"


def test_force_open_over_http_is_shown_read_by_workers_and_audited(pipeline: Pipeline) -> None:
    settings = api_settings(pipeline)
    with api_client(settings) as client:
        # Given nothing forced
        assert {b["dependency"]: b["mode"] for b in ok(client, BREAKERS)} == {
            "neo4j": "AUTOMATIC",
            "postgres": "AUTOMATIC",
        }

        # When neo4j is forced open over HTTP (reason in the body), without a token first
        path = f"{BREAKERS}/neo4j/force-open"
        assert client.post(path, json={"reason": "index rebuild"}).status_code == 401
        forced = client.post(path, json={"reason": "index rebuild"}, headers=AUTH)

        # Then every reader of the control topic sees it, and the audit has who and why
        assert forced.status_code == 200, forced.text
        assert read_controls(settings)["neo4j"].mode is BreakerMode.FORCED_OPEN
        shown = {b["dependency"]: b for b in ok(client, BREAKERS)}
        assert (shown["neo4j"]["mode"], shown["neo4j"]["forced"]) == ("FORCED_OPEN", True)
        assert (shown["neo4j"]["by"], shown["neo4j"]["reason"]) == ("alice", "index rebuild")
        assert shown["postgres"]["mode"] == "AUTOMATIC"
        (audited,) = ok(client, "/api/v1/audit", action="breaker.force-open")["entries"]
        assert (audited["by"], audited["target"], audited["reason"]) == (
            "alice",
            ["neo4j"],
            "index rebuild",
        )

        # When it is released (reason in the query): automatic again, audited too
        released = client.post(f"{BREAKERS}/neo4j/release", params={"reason": "done"}, headers=AUTH)
        assert released.status_code == 200, released.text
        assert ok(client, BREAKERS)[0]["mode"] == "AUTOMATIC"
        (release,) = ok(client, "/api/v1/audit", action="breaker.release")["entries"]
        assert release["reason"] == "done"

        # And an unknown dependency is 404 naming the known ones, nothing published
        unknown = client.post(f"{BREAKERS}/redis/force-open", headers=AUTH)
        assert unknown.status_code == 404, unknown.text
        assert "neo4j, postgres" in unknown.json()["error"]["message"]
        assert len(ok(client, "/api/v1/audit")["entries"]) == 2
