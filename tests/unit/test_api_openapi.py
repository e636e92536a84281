"""The API's OpenAPI document (built without opening anything): the DLQ routes as seed 002 §5.3
names them, the read routes of issue 18, and a token required exactly where things change."""

from __future__ import annotations

from typing import Any

import pytest

from graph_ingest.api.app import create_app
from graph_ingest.settings import Settings

pytestmark = pytest.mark.timeout(30)


def never_opened(settings: Settings) -> Any:
    raise AssertionError("building the document opened a store")


def document() -> dict[str, Any]:
    return create_app(Settings(), never_opened).openapi()


def test_every_route_is_documented_with_its_method() -> None:
    routes = {
        (method.upper(), path)
        for path, methods in document()["paths"].items()
        for method in methods
    }
    assert routes == {
        ("GET", "/health/live"),
        ("GET", "/health/ready"),
        ("GET", "/health/startup"),
        ("GET", "/api/v1/operations"),
        ("GET", "/api/v1/operations/{operation_id}"),
        ("GET", "/api/v1/projections"),
        ("GET", "/api/v1/dlq/messages"),
        ("GET", "/api/v1/dlq/messages/{dlq_id}"),
        ("POST", "/api/v1/dlq/messages/{dlq_id}/replay"),
        ("DELETE", "/api/v1/dlq/messages/{dlq_id}"),
        ("GET", "/api/v1/dlq/stats"),
        ("POST", "/api/v1/dlq/messages/replay-all"),
        ("GET", "/api/v1/dlq/tasks"),
        ("GET", "/api/v1/dlq/tasks/{task_id}"),
        ("POST", "/api/v1/dlq/tasks/{task_id}/cancel"),
        ("GET", "/api/v1/audit"),
        ("GET", "/admin/circuit-breaker"),
        ("GET", "/api/v1/documents/{space}/{document_id}"),
        ("GET", "/api/v1/errors/report"),
        ("POST", "/admin/circuit-breaker/{dependency}/force-open"),
        ("POST", "/admin/circuit-breaker/{dependency}/force-close"),
        ("POST", "/admin/circuit-breaker/{dependency}/release"),
    }


def test_a_token_is_required_exactly_by_the_routes_that_change_things() -> None:
    secured = {
        (method.upper(), path)
        for path, methods in document()["paths"].items()
        for method, operation in methods.items()
        if operation.get("security")
    }
    assert secured == {
        ("POST", "/api/v1/dlq/messages/{dlq_id}/replay"),
        ("DELETE", "/api/v1/dlq/messages/{dlq_id}"),
        ("POST", "/api/v1/dlq/messages/replay-all"),
        ("POST", "/api/v1/dlq/tasks/{task_id}/cancel"),
        ("POST", "/admin/circuit-breaker/{dependency}/force-open"),
        ("POST", "/admin/circuit-breaker/{dependency}/force-close"),
        ("POST", "/admin/circuit-breaker/{dependency}/release"),
    }


def test_the_dlq_listing_takes_the_filters_seed_002_names() -> None:
    parameters = document()["paths"]["/api/v1/dlq/messages"]["get"]["parameters"]
    assert {p["name"] for p in parameters} == {
        "status",
        "code",
        "class",
        "space",
        "document",
        "from",
        "to",
        "older_than",
        "cursor",
        "limit",
    }
