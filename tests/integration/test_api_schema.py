"""schemathesis over the API in process (``from_asgi``), on real stores holding a dead-lettered
plan: whatever the OpenAPI document allows, the app answers without a 5xx and as documented;
whatever it does not allow, the app refuses with a 4xx (never a 500)."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as examples
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import CheckFunction
from schemathesis.core.result import Err, Ok
from schemathesis.generation.case import Case
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from graph_ingest.api.app import create_app
from graph_ingest.api.services import open_services
from graph_ingest.wiring import postgres_store
from tests.integration.api_helpers import AUTH, api_settings
from tests.integration.pipeline import Pipeline
from tests.integration.test_dlq_cli import dangling, dead_lettered

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EXAMPLES = 20
"""Per operation and mode (schema-valid requests, and invalid ones, which must be refused with
a 4xx): enough to try every filter, few enough for CI (the whole test well under a minute)."""


def refused_though_schema_valid(case: Case[Any]) -> list[CheckFunction]:
    """What the schema cannot say, so a "schema-valid" request is rightly refused: a cursor is
    opaque (one this service did not give out is 400); a purge without its reason is 422 (the
    audit's message) though the parameter is optional in the schema, so that the refusal is
    the audit's own; and an errors report's range must run forwards (400 when ``from`` is not
    before ``to``)."""
    query = case.query or {}
    cursor = "cursor" in query
    unexplained = case.method.upper() == "DELETE" and not query.get("reason")
    start, end = _moment(query.get("from")), _moment(query.get("to"))
    in_report = case.path == "/api/v1/errors/report"
    backwards = in_report and start is not None and end is not None and start >= end
    return [positive_data_acceptance] if cursor or unexplained or backwards else []


def _moment(text: object) -> datetime | None:
    """``text`` as an aware time, when it is one (negative cases send anything)."""
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def test_schemathesis_finds_no_server_error_and_no_schema_violation(pipeline: Pipeline) -> None:
    pipeline.start_applier()
    failed = dangling(pipeline, 0)
    dead_lettered(pipeline, failed)
    settings = api_settings(pipeline)
    app = create_app(settings, postgres_store)
    with open_services(settings, postgres_store) as services:
        app.state.services = services  # the app leaves services it was given open: ours
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        results = list(schema.get_all_operations())
        refused = [r.err() for r in results if isinstance(r, Err)]
        assert not refused, refused
        operations = [r.ok() for r in results if isinstance(r, Ok)]
        assert len(operations) >= 22, [o.label for o in operations]
        for operation, mode in itertools.product(operations, GenerationMode):

            @given(case=operation.as_strategy(mode))
            @examples(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def answers_as_documented(case: Case[Any]) -> None:
                case.call_and_validate(
                    headers=AUTH, excluded_checks=refused_though_schema_valid(case)
                )

            try:
                answers_as_documented()
            except Unsatisfiable:
                # no request to it can break its schema (no parameter, or any string goes)
                assert mode is GenerationMode.NEGATIVE, operation.label
