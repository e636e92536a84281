"""The API's token check and error shape, on a small app of the API's own pieces (no services):
who may change things, and that every error is the one JSON shape with a stable code."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from fastapi import FastAPI, Query
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr

from graph_ingest.api.auth import Caller, token_name
from graph_ingest.api.errors import ApiError, install_error_handlers
from graph_ingest.domain.status import StatusCode

pytestmark = pytest.mark.timeout(30)

TOKENS = {"alice": SecretStr("alice-token"), "bob": SecretStr("bob-token")}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Thing(BaseModel):
    name: str


def small_app(tokens: dict[str, SecretStr]) -> FastAPI:
    app = FastAPI()
    app.state.tokens = tokens
    install_error_handlers(app)

    @app.post("/change")
    def change(caller: Caller) -> dict[str, str]:
        return {"by": caller}

    @app.get("/items/{item_id}")
    def item(item_id: str, limit: Annotated[int, Query(ge=1)] = 1) -> dict[str, str]:
        if item_id == "missing":
            raise ApiError(f"no item {item_id}", code=StatusCode.NOT_FOUND)
        if item_id == "bug":
            raise RuntimeError("a bug")
        return {"id": item_id}

    @app.post("/things")
    def things(thing: Thing) -> dict[str, str]:
        return {"name": thing.name}

    return app


def assert_error(body: dict[str, object], code: StatusCode) -> dict[str, str]:
    error = body["error"]
    assert isinstance(error, dict)
    assert set(error) == {"code", "message", "error_id", "trace_id"}
    assert error["code"] == code.value
    assert re.fullmatch(r"[0-9a-f]{32}", error["error_id"])
    assert re.fullmatch(r"[0-9a-f]{32}", error["trace_id"])
    return error


def test_a_token_is_named_by_the_configured_token_it_equals() -> None:
    assert token_name(TOKENS, "bob-token") == "bob"
    assert token_name(TOKENS, "alice-token") == "alice"
    assert token_name(TOKENS, "alice-token ") is None
    assert token_name(TOKENS, "") is None
    assert token_name({}, "alice-token") is None


def test_a_change_with_a_configured_token_is_made_by_the_tokens_name() -> None:
    client = TestClient(small_app(TOKENS))
    answer = client.post("/change", headers={"Authorization": "Bearer bob-token"})
    assert answer.status_code == 200
    assert answer.json() == {"by": "bob"}


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic YWxpY2U6eA=="])
def test_a_change_without_a_right_token_is_401_with_a_bearer_challenge(
    authorization: str | None,
) -> None:
    client = TestClient(small_app(TOKENS))
    headers = {} if authorization is None else {"Authorization": authorization}
    answer = client.post("/change", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert_error(answer.json(), StatusCode.UNAUTHENTICATED)


def test_with_no_token_configured_a_change_is_403_saying_how_to_configure_one() -> None:
    client = TestClient(small_app({}))
    answer = client.post("/change", headers={"Authorization": "Bearer anything"})
    assert answer.status_code == 403
    error = assert_error(answer.json(), StatusCode.PERMISSION_DENIED)
    assert "GRAPH_INGEST_API__TOKENS" in error["message"]


def test_errors_keep_the_callers_trace_id_and_each_gets_its_own_error_id() -> None:
    client = TestClient(small_app(TOKENS))
    traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    first = client.get("/items/missing", headers={"traceparent": traceparent})
    second = client.get("/items/missing", headers={"traceparent": traceparent})
    assert first.status_code == second.status_code == 404
    one = assert_error(first.json(), StatusCode.NOT_FOUND)
    two = assert_error(second.json(), StatusCode.NOT_FOUND)
    assert one["trace_id"] == two["trace_id"] == TRACE_ID
    assert one["error_id"] != two["error_id"]


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/items/x?limit=0", 400, StatusCode.INVALID_ARGUMENT),
        ("GET", "/items/x?limit=many", 400, StatusCode.INVALID_ARGUMENT),
        ("POST", "/things", 422, StatusCode.INVALID_ARGUMENT),
        ("GET", "/no/such/route", 404, StatusCode.NOT_FOUND),
        ("DELETE", "/items/x", 405, StatusCode.INVALID_ARGUMENT),
    ],
)
def test_bad_requests_are_json_errors_never_500_a_bad_body_422_a_bad_filter_400(
    method: str, path: str, status: int, code: StatusCode
) -> None:
    answer = TestClient(small_app(TOKENS)).request(method, path)
    assert answer.status_code == status
    assert_error(answer.json(), code)


def test_a_bug_is_a_json_500_with_an_error_id() -> None:
    client = TestClient(small_app(TOKENS), raise_server_exceptions=False)
    answer = client.get("/items/bug")
    assert answer.status_code == 500
    error = assert_error(answer.json(), StatusCode.INTERNAL)
    assert "a bug" not in error["message"]  # the log has it, the client gets the id
