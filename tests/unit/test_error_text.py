"""What a failure record quotes of an error is bounded and storable, whatever the error says."""

import pytest

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.limits import (
    ELLIPSIS,
    MAX_ERROR_CLASS_LENGTH,
    MAX_ERROR_MESSAGE_LENGTH,
    bounded_text,
    storable_text,
)
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode
from graph_ingest.resilience.classify import error_info

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("plain", "plain"),
        ("", ""),
        ("a\x00b", "a\\x00b"),
        ("\x00\x00", "\\x00\\x00"),
        ("Zürich 東京 🚀", "Zürich 東京 🚀"),
        ("bad \udcff surrogate", "bad \\udcff surrogate"),
    ],
)
def test_storable_text_escapes_what_postgresql_and_utf8_refuse(raw: str, stored: str) -> None:
    assert storable_text(raw) == stored
    assert "\x00" not in stored
    stored.encode("utf-8")  # never raises


def test_text_within_the_bound_is_kept_whole() -> None:
    text = "x" * 10

    assert bounded_text(text, 10) == text


def test_text_past_the_bound_is_cut_and_the_cut_marked() -> None:
    bounded = bounded_text("x" * 11, 10)

    assert bounded == "x" * 9 + ELLIPSIS
    assert len(bounded) == 10


def test_escaping_comes_before_the_bound_so_the_result_still_fits() -> None:
    bounded = bounded_text("\x00" * 10, 10)

    assert len(bounded) == 10
    assert bounded.endswith(ELLIPSIS)
    assert "\x00" not in bounded


def test_error_info_quotes_a_huge_message_with_nul_bounded_and_storable() -> None:
    exc = GraphIngestError("boom\x00" * 1_000, code=StatusCode.ABORTED)

    info = error_info(exc)

    assert info.code is StatusCode.ABORTED
    assert info.error_class == "GraphIngestError"
    assert len(info.message) == MAX_ERROR_MESSAGE_LENGTH
    assert info.message.startswith("boom\\x00boom")
    assert info.message.endswith(ELLIPSIS)


def test_error_info_bounds_the_class_name_too() -> None:
    info = ErrorInfo.quoting(StatusCode.INTERNAL, "E" * 1_000, "m")

    assert len(info.error_class) == MAX_ERROR_CLASS_LENGTH
