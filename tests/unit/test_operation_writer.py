"""The operation event's own writer: fastavro's bytes, for every shape an operation takes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from graph_ingest.domain.operation import ErrorInfo, Operation, OutageWait
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import EncodeError, decode_operation, write_single_object
from graph_ingest.schemas.operation_writer import WRITTEN_VERSION, write_operation
from graph_ingest.schemas.registry import BUNDLED, OPERATION
from tests.unit.operation_records import operation_record

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text()  # any code point but a lone surrogate: NUL, non-BMP, long
OPTIONAL_TEXT = st.none() | TEXT
# Instants from 1900 to 2200 in any offset: timestamp-micros before and after the epoch.
INSTANTS = st.builds(
    lambda micros, minutes: (
        datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    ).astimezone(timezone(timedelta(minutes=minutes))),
    st.integers(min_value=-2_208_988_800_000_000, max_value=7_258_118_400_000_000),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
ERRORS = st.builds(
    ErrorInfo,
    code=st.sampled_from(StatusCode),
    error_class=TEXT,
    message=TEXT,
    error_id=OPTIONAL_TEXT,
    trace_id=OPTIONAL_TEXT,
)
WAITS = st.builds(OutageWait, dependency=TEXT, started_at=INSTANTS, ended_at=INSTANTS)
OPERATIONS = st.builds(
    Operation,
    operation_id=TEXT,
    space=TEXT,
    document_id=TEXT,
    expected_revision=LONG,
    fingerprint=TEXT,
    stage=st.sampled_from(Stage),
    sequence=st.integers(min_value=1, max_value=2**63 - 1),
    attempts=LONG,
    last_error=st.none() | ERRORS,
    stage_times=st.dictionaries(st.sampled_from(Stage), INSTANTS),
    next_retry_at=st.none() | INSTANTS,
    dlq_id=OPTIONAL_TEXT,
    created_at=INSTANTS,
    updated_at=INSTANTS,
    plan_kind=st.none() | st.sampled_from(PlanKind),
    submission_id=OPTIONAL_TEXT,
    document_version=OPTIONAL_TEXT,
    retry_tier=st.none() | st.integers(min_value=0, max_value=2**63 - 1),
    parked_behind=OPTIONAL_TEXT,
    waits=st.lists(WAITS, max_size=3).map(tuple),
)


def fastavro_bytes(op: Operation) -> bytes:
    return write_single_object(BUNDLED.version(OPERATION, WRITTEN_VERSION), operation_record(op))


def prepared(**fields: object) -> Operation:
    return Operation.prepared(
        operation_id="op_1", space="s", document_id="d", expected_revision=0, fingerprint="f", at=AT
    ).model_copy(update=fields)


@examples(max_examples=300, deadline=None)
@given(OPERATIONS)
def test_every_operation_is_written_as_fastavro_writes_it_and_reads_back_equal(
    op: Operation,
) -> None:
    written = write_operation(op)

    assert written == fastavro_bytes(op)
    assert decode_operation(written) == op


def test_the_writer_follows_the_current_operation_schema() -> None:
    # A newer operation schema is still read (the writer names v2), but its new fields would
    # never be written: write them in operation_writer, then raise WRITTEN_VERSION.
    assert BUNDLED.current(OPERATION).version == WRITTEN_VERSION


@pytest.mark.parametrize(
    ("field", "value"),
    [("sequence", 2**63), ("attempts", -(2**63) - 1), ("retry_tier", 2**64)],
)
def test_an_integer_beyond_64_bits_is_refused(field: str, value: int) -> None:
    with pytest.raises(EncodeError, match=f"{field}: integer {value} does not fit in 64 bits"):
        write_operation(prepared(**{field: value}))


def test_a_naive_datetime_is_refused() -> None:
    naive = datetime(2026, 3, 1, 12, 0)

    with pytest.raises(EncodeError, match=r"stage_times\[FAILED\]: naive datetime"):
        write_operation(prepared(stage_times={Stage.PREPARED: AT, Stage.FAILED: naive}))


def test_a_lone_surrogate_is_refused_with_the_field_it_is_in() -> None:
    error = ErrorInfo(code=StatusCode.INTERNAL, error_class="X", message="half \ud800 a pair")

    with pytest.raises(EncodeError, match=r"last_error\.message: not encodable as UTF-8") as caught:
        write_operation(prepared(last_error=error))

    assert caught.value.code is StatusCode.INVALID_ARGUMENT


def test_instants_keep_their_exact_bytes_when_more_are_written_than_are_kept() -> None:
    # The writer keeps each instant's bytes for the events that repeat it, up to a bound.
    ops = [
        prepared(
            stage_times={Stage.PREPARED: AT + timedelta(microseconds=n)},
            created_at=AT - timedelta(days=n),
            updated_at=AT + timedelta(seconds=n),
        )
        for n in range(5_000)
    ]

    written = [write_operation(op) for op in ops]

    assert written == [fastavro_bytes(op) for op in ops]
    assert write_operation(ops[0]) == written[0]


def test_one_instant_in_two_offsets_is_written_alike() -> None:
    berlin = AT.astimezone(timezone(timedelta(hours=1)))

    assert write_operation(prepared(created_at=berlin)) == write_operation(prepared(created_at=AT))
