"""W3C traceparent: what the specification accepts is read, everything else is refused."""

import pytest
from pydantic import TypeAdapter, ValidationError

from graph_ingest.domain.trace import (
    SAMPLED,
    InvalidTraceparent,
    TraceId,
    TraceParent,
    check_trace_id,
    new_parent_id,
    new_trace_id,
    parse_traceparent,
)

pytestmark = pytest.mark.timeout(10)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
EXAMPLE = f"00-{TRACE_ID}-{PARENT_ID}-01"  # the specification's own example


def test_the_specification_example_parses() -> None:
    parsed = parse_traceparent(EXAMPLE)

    assert parsed == TraceParent(trace_id=TRACE_ID, parent_id=PARENT_ID, flags=SAMPLED)
    assert parsed.header_value() == EXAMPLE


def test_unsampled_flags_are_kept() -> None:
    assert parse_traceparent(f"00-{TRACE_ID}-{PARENT_ID}-00").flags == 0


def test_a_future_version_is_read_as_version_00_and_may_carry_more_fields() -> None:
    parsed = parse_traceparent(f"cc-{TRACE_ID}-{PARENT_ID}-01-what-the-future-adds")

    assert (parsed.trace_id, parsed.parent_id) == (TRACE_ID, PARENT_ID)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        f"00-{TRACE_ID}-{PARENT_ID}",  # no flags
        f"00-{TRACE_ID}-{PARENT_ID}-01-extra",  # version 00 has exactly four fields
        f"ff-{TRACE_ID}-{PARENT_ID}-01",  # version ff is forbidden
        f"00-{'0' * 32}-{PARENT_ID}-01",  # all-zero trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",  # upper-case hex
        f"00-{TRACE_ID[:-1]}-{PARENT_ID}-01",  # 31 hex digits
        f"00-{TRACE_ID}0-{PARENT_ID}-01",  # 33 hex digits
        f"00-{TRACE_ID}-{PARENT_ID[:-1]}-01",
        f"00-{TRACE_ID}-{PARENT_ID}-1",
        f"00-{TRACE_ID}-{PARENT_ID}-0g",
        f"0-{TRACE_ID}-{PARENT_ID}-01",
        f"00_{TRACE_ID}_{PARENT_ID}_01",
        f"00-{TRACE_ID[:31]}z-{PARENT_ID}-01",
    ],
)
def test_malformed_values_are_refused(value: str) -> None:
    with pytest.raises(InvalidTraceparent):
        parse_traceparent(value)


def test_new_ids_have_the_right_shape_and_differ() -> None:
    trace_ids = {new_trace_id() for _ in range(100)}
    parent_ids = {new_parent_id() for _ in range(100)}

    assert len(trace_ids) == len(parent_ids) == 100
    assert all(check_trace_id(t) == t for t in trace_ids)
    assert all(len(p) == 16 and int(p, 16) >= 0 for p in parent_ids)


def test_a_new_span_of_a_trace_parses_back_to_the_same_trace() -> None:
    span = TraceParent.new(TRACE_ID)

    parsed = parse_traceparent(span.header_value())

    assert parsed.trace_id == TRACE_ID
    assert parsed.parent_id == span.parent_id != PARENT_ID
    assert parsed.flags == SAMPLED


def test_a_new_trace_when_none_is_given() -> None:
    assert TraceParent.new().trace_id != TraceParent.new().trace_id


@pytest.mark.parametrize("value", ["", "0" * 32, TRACE_ID.upper(), TRACE_ID[:-1], TRACE_ID + "0"])
def test_trace_id_fields_refuse_what_is_not_a_trace_id(value: str) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(TraceId).validate_python(value)
