"""The IngestRequested event: exact round trips, and poison refused with a clear error."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from graph_ingest.domain.request import IngestRequest, RequestKind
from graph_ingest.schemas.codec import (
    DecodeError,
    EncodeError,
    decode_ingest_request,
    decode_plan,
    encode_ingest_request,
    encode_plan,
    write_single_object,
)
from graph_ingest.schemas.registry import BUNDLED, INGEST_REQUEST
from tests.unit.plans import plan_for
from tests.unit.requests import candidates, request, rich_request

pytestmark = pytest.mark.timeout(30)


def test_a_request_with_every_field_round_trips_exactly() -> None:
    original = rich_request()

    decoded = decode_ingest_request(encode_ingest_request(original))

    assert decoded == original
    props = decoded.candidates.entities[0].properties  # type: ignore[union-attr]
    assert [type(props[k]) for k in ("age", "score", "active")] == [int, float, bool]
    assert props["x"] is None


def test_a_minimal_request_and_a_retraction_round_trip() -> None:
    for original in (
        request(),
        IngestRequest(
            kind=RequestKind.RETRACT,
            space="unit",
            document_id="doc-1",
            document_version="v9",
            schema_version="s1",
        ),
        request(content=None, content_ref="s3://bucket/doc-1", content_hash="sha256:ab"),
    ):
        assert decode_ingest_request(encode_ingest_request(original)) == original


def test_the_source_time_comes_back_utc_and_the_same_instant() -> None:
    at = datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(hours=1)))

    decoded = decode_ingest_request(encode_ingest_request(request(source_updated_at=at)))

    assert decoded.source_updated_at == at
    assert decoded.source_updated_at.utcoffset() == timedelta(0)


def test_a_naive_source_time_is_refused_on_encode() -> None:
    with pytest.raises(EncodeError, match="source_updated_at: naive datetime"):
        encode_ingest_request(request(source_updated_at=datetime(2026, 12, 1)))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**100])
def test_a_candidate_integer_beyond_64_bits_is_refused_not_rounded(value: int) -> None:
    extraction = candidates()
    entity = extraction.entities[0].model_copy(update={"properties": {"big": value}})
    poisoned = request(candidates=extraction.model_copy(update={"entities": (entity,)}))

    with pytest.raises(EncodeError, match=r"property big: integer -?\d+ does not fit in 64 bits"):
        encode_ingest_request(poisoned)


def _raw(**changes: Any) -> bytes:
    """A well-formed IngestRequested message whose fields say what ``changes`` say: what a
    producer not using this library might send."""
    record: dict[str, Any] = {
        "kind": "INGEST",
        "space": "unit",
        "document_id": "doc-1",
        "document_version": "v1",
        "source_updated_at": None,
        "schema_version": "s1",
        "content": "text",
        "content_ref": None,
        "content_hash": None,
        "operation_id": None,
        "batch_id": None,
        "options": {
            "stale_relation_policy": "KEEP",
            "re_extract_unchanged": False,
            "fail_on_extraction_error": False,
            "allow_partial_reconciliation": True,
        },
        "candidates": None,
        **changes,
    }
    return write_single_object(BUNDLED.current(INGEST_REQUEST), record)


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"content": "a\x00b"}, "content"),
        ({"document_id": "doc\x00"}, "document_id"),
        ({"space": "not an identifier"}, "space"),
        ({"space": "x" * 200}, "space"),
        ({"document_id": "d" * 600}, "document_id"),
        ({"kind": "UPSERT"}, "kind"),
        ({"content": None}, "needs content or content_ref"),
        ({"content_ref": "s3://x"}, "not both"),
    ],
)
def test_a_request_that_fails_validation_is_a_decode_error_naming_the_field(
    changes: dict[str, Any], where: str
) -> None:
    raw = _raw(**changes)

    with pytest.raises(DecodeError, match=where) as caught:
        decode_ingest_request(raw)

    assert caught.value.raw == raw
    assert "a\x00b" not in str(caught.value)  # the document text is not quoted


def test_plan_bytes_are_not_a_request_and_request_bytes_are_not_a_plan() -> None:
    with pytest.raises(DecodeError, match=r"written with plan\.v\d"):
        decode_ingest_request(encode_plan(plan_for("d")))
    with pytest.raises(DecodeError, match=r"written with ingest_request\.v1"):
        decode_plan(encode_ingest_request(request()))


def test_every_truncation_is_a_decode_error() -> None:
    encoded = encode_ingest_request(rich_request())

    for end in range(len(encoded)):
        with pytest.raises(DecodeError):
            decode_ingest_request(encoded[:end])
