"""The read service's cursor: it round-trips, and anything it did not give out is refused as
an invalid query (an API's 400), never a crash."""

from __future__ import annotations

import base64

import pytest

from graph_ingest.projections.fold import fold
from graph_ingest.projections.queries import InvalidQuery, decode_cursor, encode_cursor
from tests.operation_histories import history

pytestmark = pytest.mark.timeout(30)


def test_a_cursor_names_the_last_row_of_its_page() -> None:
    status = fold(None, history("op-7", ())[0]).status
    assert decode_cursor(encode_cursor(status)) == (status.updated_at, "op-7")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not-base64!",
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(b'["2026-12-01T03:00:00", "op"]').decode(),  # naive time
        base64.urlsafe_b64encode(b'["2026-12-01T03:00:00+00:00", 5]').decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "é",
    ],
)
def test_a_cursor_it_did_not_give_out_is_an_invalid_query(cursor: str) -> None:
    with pytest.raises(InvalidQuery):
        decode_cursor(cursor)
