"""``GRAPH_INGEST_API__TOKENS``: a JSON object of name -> token, and a mistake in it one clear
line at start-up."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from graph_ingest.settings import Settings

pytestmark = pytest.mark.timeout(30)

LONG = "x" * 16


def test_tokens_are_read_from_json_and_kept_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPH_INGEST_API__TOKENS", f'{{"alice": "{LONG}", "bob": "{LONG}y"}}')
    tokens = Settings().api.tokens
    assert {name: t.get_secret_value() for name, t in tokens.items()} == {
        "alice": LONG,
        "bob": f"{LONG}y",
    }
    assert LONG not in repr(Settings().api)


def test_no_tokens_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPH_INGEST_API__TOKENS", raising=False)
    assert Settings().api.tokens == {}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("alice=secret", "not a JSON object of name -> token"),
        ('["x"]', "valid dictionary"),
        ('{"alice": "short"}', "shorter than 16 characters"),
    ],
)
def test_a_bad_tokens_variable_fails_at_start_up_saying_why(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    monkeypatch.setenv("GRAPH_INGEST_API__TOKENS", value)
    with pytest.raises(ValidationError, match=says):
        Settings()
