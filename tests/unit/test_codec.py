"""Avro codec: exact round trips, single-object framing, poison detection, schema evolution."""

from __future__ import annotations

import copy
import json
import random
import typing
from datetime import UTC, datetime, timedelta, timezone
from importlib import resources
from typing import Any

import pytest
from fastavro.schema import expand_schema, fingerprint, to_parsing_canonical_form
from pydantic import BaseModel

from graph_ingest.domain.degradation import DegradationEvent, DegradationLevel
from graph_ingest.domain.dlq import MAX_ATTEMPT_HISTORY, DlqEnvelope, DlqStatus, MessageHeader
from graph_ingest.domain.errors import ConfigurationError, GraphIngestError
from graph_ingest.domain.limits import MAX_ERROR_MESSAGE_LENGTH
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.operation import ErrorInfo, Operation, OutageWait
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind, Provenance
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import (
    DocumentState,
    EntityRegistration,
    Evidence,
    FactKind,
    FactSource,
    fact_id_of,
)
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import codec, registry
from graph_ingest.schemas.codec import (
    HEADER_SIZE,
    MARKER,
    DecodeError,
    EncodeError,
    decode_degradation_event,
    decode_dlq_envelope,
    decode_operation,
    decode_plan,
    encode_degradation_event,
    encode_dlq_envelope,
    encode_operation,
    encode_plan,
    write_single_object,
)
from graph_ingest.schemas.registry import (
    BUNDLED,
    DEGRADATION_EVENT,
    DLQ_ENVELOPE,
    INGEST_REQUEST,
    OPERATION,
    PLAN,
    SchemaCatalogue,
    schema_version,
)
from tests.unit.dlq_envelopes import attempt, envelope
from tests.unit.operation_records import operation_record

pytestmark = pytest.mark.timeout(60)

AT = datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)

PROPERTIES: dict[str, Any] = {
    "name": "Ada Lovelace",
    "unicode": "Zürich — 東京 🚀",
    "empty": "",
    "count": 1,
    "negative": -42,
    "zero": 0,
    "safe_max": 2**53 - 1,
    "safe_min": -(2**53 - 1),
    "ratio": 1.0,
    "tenth": 0.1,
    "tiny": -5e-324,
    "yes": True,
    "no": False,
    "missing": None,
    "mixed": [True, 1, 1.0, "1", False, 0, 0.0],
    "numbers": [1, 2, 3],
    "nothing": [],
}


def _raw_schema(subject: str, version: int | None = None) -> dict[str, Any]:
    """A bundled schema file as JSON: ``version`` of ``subject``, by default its current one."""
    number = BUNDLED.current(subject).version if version is None else version
    name = f"{subject}.v{number}.avsc"
    text = resources.files("graph_ingest.schemas").joinpath(name).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _typed(value: Any) -> Any:
    """The value with every scalar paired with its exact type: 1, 1.0 and True differ here."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return (type(value), value)


def rich_plan(**overrides: Any) -> IngestionPlan:
    edge_ab = EdgeKey(src="n:ada", type="KNOWS", dst="n:bob", rank=0)
    edge_ab2 = EdgeKey(src="n:ada", type="KNOWS", dst="n:bob", rank=2)
    old_edge = EdgeKey(src="n:ada", type="WORKED_AT", dst="n:old", rank=0)
    fields: dict[str, Any] = {
        "kind": PlanKind.INGESTION,
        "space": "research",
        "document_id": "doc/42",
        "document_version": "v7",
        "operation_id": "op_0123456789abcdef",
        "expected_revision": 3,
        "base_operation_id": "op_base",
        "graph": GraphOptions(database="kg", node_label="Thing"),
        "mutation": Mutation(
            node_upserts=(
                NodeUpsert(node_id="n:ada", labels=("Person", "Author"), properties=PROPERTIES),
                NodeUpsert(node_id="n:bob", labels=("Person",), properties={"n": 2.5}),
                NodeUpsert(node_id="n:bare"),
            ),
            edge_upserts=(
                EdgeUpsert(src="n:ada", type="KNOWS", dst="n:bob", properties=PROPERTIES),
                EdgeUpsert(src="n:ada", type="KNOWS", dst="n:bob", rank=2),
            ),
            node_deletes=("n:gone", "n:gone2"),
            edge_deletes=(old_edge,),
            detach_deleted_nodes=True,
            deletes_if_unreferenced=True,
        ),
        "next_state": DocumentState(
            space="research",
            document_id="doc/42",
            revision=4,
            operation_id="op_0123456789abcdef",
            content_hash="sha256:abc",
            document_version="v7",
            node_ids=("n:ada", "n:bob", "n:bare"),
            edge_keys=(edge_ab, edge_ab2),
            superseded_edge_keys=(old_edge,),
            kept_edge_keys=(EdgeKey(src="n:ada", type="MET", dst="n:bob", rank=0),),
            base_operation_id="op_base",
            fact_sources=(
                FactSource(
                    fact_id="n:ada",
                    kind=FactKind.NODE,
                    evidence=(
                        Evidence(quote="Ada", start=0, end=3),
                        Evidence(quote="Lovelace", start=4, end=12),
                    ),
                ),
                FactSource(fact_id=fact_id_of(edge_ab), kind=FactKind.EDGE),
            ),
            schema_version="2026-12-01",
            extraction_fingerprint="v1:" + "cd" * 32,
            source_updated_at=AT - timedelta(days=1),
            committed_at=AT + timedelta(seconds=1),
        ),
        "registrations": (
            EntityRegistration(
                space="research",
                entity_type="Person",
                name="Ada Lovelace",
                normalized_name="ada lovelace",
                node_id="n:ada",
                aliases=("Ada", "Countess of Lovelace"),
            ),
            EntityRegistration(
                space="research",
                entity_type="Person",
                name="Bob",
                normalized_name="bob",
                node_id="n:bob",
            ),
        ),
        "provenance": Provenance(extractor="llm", model="some-model", prompt_version="p3"),
        "created_at": AT,
    }
    fields.update(overrides)
    return IngestionPlan.freeze(**fields)


def minimal_plan() -> IngestionPlan:
    return IngestionPlan.freeze(
        kind=PlanKind.INGESTION,
        space="s",
        document_id="d",
        document_version="",
        operation_id="op_1",
        expected_revision=0,
        next_state=DocumentState(
            space="s",
            document_id="d",
            revision=1,
            operation_id="op_1",
            content_hash="sha256:0",
            document_version="",
        ),
        created_at=AT,
    )


def failed_operation() -> Operation:
    op = Operation.prepared(
        operation_id="op_0123456789abcdef",
        space="research",
        document_id="doc/42",
        expected_revision=3,
        fingerprint="v1:" + "ab" * 32,
        at=AT,
    )
    op = op.transition(Stage.GRAPH_APPLIED, AT + timedelta(milliseconds=5))
    op = op.transition(Stage.DEAD_LETTERED, AT + timedelta(seconds=2))
    op = op.transition(Stage.PREPARED, AT + timedelta(minutes=1))
    error = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="ServiceUnavailable", message="down")
    op = op.transition(Stage.FAILED, AT + timedelta(minutes=2), error)
    return op.model_copy(
        update={"next_retry_at": AT + timedelta(minutes=2, seconds=5), "dlq_id": "dlq-7"}
    )


# --- round trips ----------------------------------------------------------------------------------


def test_rich_plan_round_trips_exactly_with_the_same_fingerprint() -> None:
    plan = rich_plan()

    decoded = decode_plan(encode_plan(plan))

    assert decoded == plan
    assert decoded.fingerprint == plan.fingerprint
    assert decoded.computed_fingerprint() == plan.fingerprint
    decoded.verify_fingerprint()
    assert decoded.provenance == plan.provenance
    assert decoded.created_at == AT
    assert decoded.next_state.committed_at == AT + timedelta(seconds=1)


def test_property_values_keep_their_exact_types() -> None:
    plan = rich_plan()

    decoded = decode_plan(encode_plan(plan))

    for before, after in [
        (plan.mutation.node_upserts[0].properties, decoded.mutation.node_upserts[0].properties),
        (plan.mutation.edge_upserts[0].properties, decoded.mutation.edge_upserts[0].properties),
    ]:
        assert _typed(after) == _typed(before)
    props = decoded.mutation.node_upserts[0].properties
    assert props["yes"] is True
    assert type(props["count"]) is int
    assert type(props["ratio"]) is float
    assert props["missing"] is None
    assert [type(v) for v in props["mixed"]] == [bool, int, float, str, bool, int, float]  # type: ignore[union-attr]


def test_minimal_plan_round_trips() -> None:
    plan = minimal_plan()

    decoded = decode_plan(encode_plan(plan))

    assert decoded == plan
    assert decoded.computed_fingerprint() == plan.fingerprint
    assert decoded.next_state.committed_at is None
    assert decoded.provenance == Provenance()


def test_datetimes_come_back_aware_utc_and_the_same_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    plan = rich_plan(created_at=datetime(2026, 3, 1, 14, 30, tzinfo=plus_two))

    decoded = decode_plan(encode_plan(plan))

    assert decoded.created_at == plan.created_at
    assert decoded.created_at.utcoffset() == timedelta(0)
    assert decoded.next_state.committed_at is not None
    assert decoded.next_state.committed_at.utcoffset() == timedelta(0)


def test_naive_datetime_is_refused_on_encode() -> None:
    plan = rich_plan(created_at=datetime(2026, 3, 1, 12, 0))

    with pytest.raises(EncodeError, match="naive") as caught:
        encode_plan(plan)

    assert caught.value.code is StatusCode.INVALID_ARGUMENT


def _with_properties(properties: dict[str, Any]) -> IngestionPlan:
    # model_construct, not validation: the domain refuses ints beyond 2**53 - 1, and these tests
    # check that the codec defends itself even against a plan built around that check.
    node = NodeUpsert.model_construct(node_id="n", labels=(), properties=properties)
    mutation = Mutation.model_construct(
        node_upserts=(node,),
        edge_upserts=(),
        node_deletes=(),
        edge_deletes=(),
        detach_deleted_nodes=False,
    )
    return minimal_plan().model_copy(update={"kind": PlanKind.INGESTION, "mutation": mutation})


def test_integers_round_trip_at_the_bounds_of_the_domain() -> None:
    # The domain keeps integers within ±(2**53 - 1), the range canonical JSON holds exactly.
    plan = _with_properties({"max": 2**53 - 1, "min": -(2**53 - 1), "list": [2**53 - 1, -1]})

    decoded = decode_plan(encode_plan(plan))

    assert _typed(decoded.mutation.node_upserts[0].properties) == _typed(
        plan.mutation.node_upserts[0].properties
    )


def test_integer_beyond_the_domain_range_is_refused_on_decode() -> None:
    plan = _with_properties({"big": 2**62})

    with pytest.raises(DecodeError):
        decode_plan(encode_plan(plan))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, [1, 2**64]])
def test_integer_beyond_64_bits_is_refused_not_turned_into_a_double(value: Any) -> None:
    plan = _with_properties({"big": value})

    with pytest.raises(EncodeError, match="64 bits"):
        encode_plan(plan)


def test_operation_round_trips_with_error_stage_times_and_retry_time() -> None:
    op = failed_operation()

    decoded = decode_operation(encode_operation(op))

    assert decoded == op
    assert decoded.last_error == ErrorInfo(
        code=StatusCode.UNAVAILABLE, error_class="ServiceUnavailable", message="down"
    )
    assert set(decoded.stage_times) == {
        Stage.PREPARED,
        Stage.GRAPH_APPLIED,
        Stage.DEAD_LETTERED,
        Stage.FAILED,
    }
    assert all(isinstance(stage, Stage) for stage in decoded.stage_times)
    assert all(at.utcoffset() == timedelta(0) for at in decoded.stage_times.values())
    assert decoded.next_retry_at == AT + timedelta(minutes=2, seconds=5)
    assert decoded.sequence == op.sequence
    assert decoded.attempts == 1


def test_fresh_operation_round_trips_with_empty_optionals() -> None:
    op = Operation.prepared(
        operation_id="op_1", space="s", document_id="d", expected_revision=0, fingerprint="f", at=AT
    )

    decoded = decode_operation(encode_operation(op))

    assert decoded == op
    assert decoded.last_error is None
    assert decoded.next_retry_at is None
    assert decoded.dlq_id is None


def v2_operation() -> Operation:
    """An operation with every field operation.v2 added."""
    error = ErrorInfo(
        code=StatusCode.UNAVAILABLE,
        error_class="ServiceUnavailable",
        message="down",
        error_id="e" * 32,
        trace_id="7" * 32,
    )
    return failed_operation().model_copy(
        update={
            "last_error": error,
            "plan_kind": PlanKind.RETRACTION,
            "submission_id": "sub-1",
            "document_version": "v7",
            "retry_tier": 1,
            "parked_behind": "op_leader",
            "waits": (
                OutageWait(
                    dependency="neo4j",
                    started_at=AT + timedelta(seconds=1),
                    ended_at=AT + timedelta(minutes=6),
                ),
            ),
        }
    )


def test_operation_round_trips_every_v2_field() -> None:
    op = v2_operation()

    decoded = decode_operation(encode_operation(op))

    assert decoded == op
    assert decoded.waits[0].ended_at - decoded.waits[0].started_at == timedelta(
        minutes=5, seconds=59
    )


def test_an_operation_written_with_operation_v1_decodes_with_the_v2_defaults() -> None:
    # Given an operation.v1 writer (a relay deployed before v2) and an event with an error
    v1 = schema_version(OPERATION, 1, _raw_schema(OPERATION, 1))
    assert BUNDLED.lookup(v1.fingerprint) is not None
    assert BUNDLED.current(OPERATION).version == 2
    op = failed_operation()
    v1_fields = {field["name"] for field in _raw_schema(OPERATION, 1)["fields"]}
    record = {k: v for k, v in operation_record(op).items() if k in v1_fields}
    for name in ("error_id", "trace_id"):
        del record["last_error"][name]

    # When the current reader decodes it
    decoded = decode_operation(write_single_object(v1, record))

    # Then it is the same operation, the v2 fields at their defaults
    assert decoded == op
    assert decoded.plan_kind is None and decoded.document_version is None and decoded.waits == ()
    assert decoded.last_error is not None and decoded.last_error.error_id is None


# --- the DLQ envelope -----------------------------------------------------------------------------


def test_dlq_envelope_round_trips_exactly() -> None:
    sent = envelope()

    decoded = decode_dlq_envelope(encode_dlq_envelope(sent))

    assert decoded == sent
    assert decoded.dead_lettered_at.utcoffset() == timedelta(0)
    assert all(a.at.utcoffset() == timedelta(0) for a in decoded.attempts)
    assert [a.tier for a in decoded.attempts] == [None, 0, 1, 2]


NASTY_BYTES = [
    b"",
    b"\x00",
    b"\x00\x00 nul inside \x00",
    b"\xff\xfe\xfd",
    b"\xc3\x28",
    bytes(range(256)),
]


@pytest.mark.parametrize("raw", NASTY_BYTES)
def test_dlq_envelope_keeps_nul_and_non_utf8_bytes_exactly(raw: bytes) -> None:
    sent = envelope(
        original_key=raw,
        original_value=raw,
        original_headers=(
            MessageHeader(key="raw", value=raw),
            MessageHeader(key="raw", value=raw + b"again"),  # a repeated header stays repeated
            MessageHeader(key="null", value=None),
        ),
    )

    decoded = decode_dlq_envelope(encode_dlq_envelope(sent))

    assert decoded == sent
    assert decoded.original_key == raw
    assert decoded.original_value == raw
    assert [(h.key, h.value) for h in decoded.original_headers] == [
        ("raw", raw),
        ("raw", raw + b"again"),
        ("null", None),
    ]


def test_dlq_envelope_of_a_message_without_key_value_or_operation() -> None:
    sent = envelope(
        original_key=None,
        original_value=None,
        original_headers=(),
        operation_id=None,
        fingerprint=None,
        status=DlqStatus.RESOLVED,
    )

    assert decode_dlq_envelope(encode_dlq_envelope(sent)) == sent


def test_dlq_envelope_with_huge_error_messages_stays_bounded() -> None:
    huge = "plan too big \x00 " * 100_000
    sent = envelope(attempts=(attempt(1, message=huge), attempt(2, tier=0, message=huge)))

    data = encode_dlq_envelope(sent)

    decoded = decode_dlq_envelope(data)
    assert decoded == sent
    assert all(len(a.message) == MAX_ERROR_MESSAGE_LENGTH for a in decoded.attempts)
    assert len(data) < 4 * MAX_ERROR_MESSAGE_LENGTH + 2_000


def test_dlq_envelope_with_more_attempts_than_the_limit_round_trips_folded() -> None:
    sent = envelope()
    for number in range(5, 5 + 3 * MAX_ATTEMPT_HISTORY):
        sent = sent.with_attempt(attempt(number, tier=number % 3))

    decoded = decode_dlq_envelope(encode_dlq_envelope(sent))

    assert decoded == sent
    assert len(decoded.attempts) == MAX_ATTEMPT_HISTORY
    assert decoded.attempts[0].attempt == 1
    assert decoded.total_attempts == 4 + 3 * MAX_ATTEMPT_HISTORY
    assert decoded.folded_attempts == decoded.total_attempts - MAX_ATTEMPT_HISTORY


def test_dlq_envelope_naive_datetime_is_refused_on_encode() -> None:
    with pytest.raises(EncodeError, match="dead_lettered_at: naive"):
        encode_dlq_envelope(envelope(dead_lettered_at=datetime(2026, 3, 1)))


def test_plan_bytes_are_not_a_dlq_envelope() -> None:
    _assert_decode_error(
        encode_plan(minimal_plan()),
        f"written with plan.v{BUNDLED.current(PLAN).version}",
        decode=decode_dlq_envelope,
    )


# --- the degradation event -----------------------------------------------------------------------


def degradation_event(**changes: Any) -> DegradationEvent:
    fields: dict[str, Any] = {
        "worker_id": "applier-1",
        "level": DegradationLevel.L2,
        "previous_level": DegradationLevel.L1,
        "reason": "circuit breaker open: neo4j, postgres",
        "at": AT,
    }
    return DegradationEvent(**{**fields, **changes})


@pytest.mark.parametrize("level", list(DegradationLevel))
def test_degradation_event_round_trips_exactly(level: DegradationLevel) -> None:
    sent = degradation_event(level=level)

    decoded = decode_degradation_event(encode_degradation_event(sent))

    assert decoded == sent
    assert decoded.level is level
    assert decoded.previous_level is DegradationLevel.L1


def test_degradation_event_time_comes_back_utc_and_the_same_instant() -> None:
    cet = timezone(timedelta(hours=1))
    sent = degradation_event(at=datetime(2026, 3, 24, 11, 30, 0, 7, tzinfo=cet))

    decoded = decode_degradation_event(encode_degradation_event(sent))

    assert decoded.at == sent.at
    assert decoded.at.utcoffset() == timedelta(0)
    assert decoded.at.hour == 10


def test_degradation_event_with_a_naive_time_is_refused_on_encode() -> None:
    # model_construct: the model refuses a naive time itself; the codec must too.
    naive = DegradationEvent.model_construct(
        **{**dict(degradation_event()), "at": AT.replace(tzinfo=None)}
    )

    with pytest.raises(EncodeError, match="at: naive"):
        encode_degradation_event(naive)


def test_dlq_envelope_bytes_are_not_a_degradation_event() -> None:
    _assert_decode_error(
        encode_dlq_envelope(envelope()),
        "written with dlq_envelope.v1",
        decode=decode_degradation_event,
    )


# --- single-object framing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "encoded"),
    [
        (PLAN, lambda: encode_plan(rich_plan())),
        (OPERATION, lambda: encode_operation(failed_operation())),
        (DLQ_ENVELOPE, lambda: encode_dlq_envelope(envelope())),
        (DEGRADATION_EVENT, lambda: encode_degradation_event(degradation_event())),
    ],
)
def test_message_starts_with_the_single_object_header_of_its_schema(
    subject: str, encoded: Any
) -> None:
    data = encoded()
    canonical = to_parsing_canonical_form(_raw_schema(subject))
    expected = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))

    assert data[:2] == b"\xc3\x01" == MARKER
    assert data[2:HEADER_SIZE] == expected == BUNDLED.current(subject).fingerprint


def test_fingerprint_bytes_are_little_endian_as_the_avro_spec_says() -> None:
    # Avro's own test vector (share/test/data/schema-tests.txt): "null" -> 7195948357588979594.
    as_long = int.from_bytes(
        bytes.fromhex(fingerprint('"null"', "CRC-64-AVRO")), "little", signed=True
    )
    assert as_long == 7195948357588979594


def test_every_subject_has_its_own_fingerprint() -> None:
    subjects = (PLAN, OPERATION, DLQ_ENVELOPE, DEGRADATION_EVENT)
    fingerprints = {BUNDLED.current(s).fingerprint for s in subjects}
    assert len(fingerprints) == len(subjects)


# --- poison: DecodeError with the raw bytes ------------------------------------------------------


def _assert_decode_error(data: bytes, match: str, decode: Any = decode_plan) -> DecodeError:
    with pytest.raises(DecodeError, match=match) as caught:
        decode(data)
    error = caught.value
    assert error.raw == data
    assert error.code is StatusCode.INVALID_ARGUMENT
    assert isinstance(error, GraphIngestError)
    return error


def test_empty_bytes() -> None:
    _assert_decode_error(b"", "not Avro single-object")


def test_shorter_than_the_header() -> None:
    _assert_decode_error(encode_plan(minimal_plan())[: HEADER_SIZE - 1], "not Avro single-object")


@pytest.mark.parametrize("prefix", [b"\x00\x01", b"\xc3\x02", b"\x00\x00\x00\x00\x07", b'{"'])
def test_wrong_marker(prefix: bytes) -> None:
    body = encode_plan(minimal_plan())
    _assert_decode_error(prefix + body[len(prefix) :], "not Avro single-object")


def test_unknown_fingerprint() -> None:
    data = encode_plan(minimal_plan())
    data = MARKER + b"\x01\x02\x03\x04\x05\x06\x07\x08" + data[HEADER_SIZE:]

    _assert_decode_error(data, "unknown writer schema fingerprint 0102030405060708")


def test_operation_bytes_are_not_a_plan() -> None:
    _assert_decode_error(encode_operation(failed_operation()), "written with operation.v2")


def test_every_truncation_of_the_body_is_a_decode_error() -> None:
    data = encode_plan(rich_plan())

    for end in range(HEADER_SIZE, len(data)):
        error = _assert_decode_error(data[:end], "does not decode|validation")
        assert error.__cause__ is not None


@pytest.mark.parametrize(
    ("encoded", "decode"),
    [
        (lambda: encode_dlq_envelope(envelope()), decode_dlq_envelope),
        (lambda: encode_degradation_event(degradation_event()), decode_degradation_event),
    ],
    ids=[DLQ_ENVELOPE, DEGRADATION_EVENT],
)
def test_every_truncation_of_a_record_is_a_decode_error(encoded: Any, decode: Any) -> None:
    data = encoded()

    for end in range(HEADER_SIZE, len(data)):
        _assert_decode_error(data[:end], "does not decode|validation", decode=decode)


def test_trailing_bytes_are_a_decode_error() -> None:
    _assert_decode_error(encode_plan(minimal_plan()) + b"\x00", "bytes after the record")


def test_garbage_bodies_raise_only_decode_errors() -> None:
    rng = random.Random(20260301)
    header = encode_plan(minimal_plan())[:HEADER_SIZE]

    for _ in range(2000):
        data = header + rng.randbytes(rng.randint(0, 64))
        with pytest.raises(DecodeError) as caught:
            decode_plan(data)
        assert caught.value.raw == data


def test_flipped_bytes_never_escape_as_foreign_exceptions() -> None:
    rng = random.Random(7)
    data = bytearray(encode_operation(failed_operation()))

    for _ in range(2000):
        mutated = bytearray(data)
        mutated[rng.randrange(HEADER_SIZE, len(mutated))] = rng.randrange(256)
        try:
            decode_operation(bytes(mutated))
        except DecodeError as error:
            assert error.raw == bytes(mutated)


def _plan_record_with(change: Any) -> bytes:
    record = codec._plan_record(rich_plan())
    change(record)
    return write_single_object(BUNDLED.current(PLAN), record)


def test_valid_avro_with_an_invalid_label_fails_validation() -> None:
    def smuggle(record: dict[str, Any]) -> None:
        record["mutation"]["node_upserts"][0]["labels"] = ["Person", "a-b"]

    error = _assert_decode_error(_plan_record_with(smuggle), "fails validation")
    assert error.__cause__ is not None
    assert "mutation.node_upserts.0.labels.1" in error.message


def test_validation_message_does_not_repeat_the_document_text() -> None:
    def stale(record: dict[str, Any]) -> None:
        record["expected_revision"] = 9
        record["next_state"]["fact_sources"][0]["evidence"][0]["quote"] = "SECRET QUOTE"

    error = _assert_decode_error(_plan_record_with(stale), "fails validation")
    assert "expected_revision + 1" in error.message
    assert "SECRET" not in error.message


def test_valid_avro_with_an_invalid_property_name_fails_validation() -> None:
    def smuggle(record: dict[str, Any]) -> None:
        record["mutation"]["edge_upserts"][0]["properties"]["x}) DETACH DELETE n //"] = None

    _assert_decode_error(_plan_record_with(smuggle), "fails validation")


def test_valid_avro_with_an_inconsistent_plan_fails_validation() -> None:
    def stale(record: dict[str, Any]) -> None:
        record["expected_revision"] = 9

    _assert_decode_error(_plan_record_with(stale), "fails validation")


@pytest.mark.parametrize(
    ("subject", "record", "field", "unknown", "decode"),
    [
        (
            OPERATION,
            lambda: operation_record(failed_operation()),
            "stage",
            "TELEPORTED",
            decode_operation,
        ),
        (
            DLQ_ENVELOPE,
            lambda: codec._dlq_envelope_record(envelope()),
            "status",
            "FORGOTTEN",
            decode_dlq_envelope,
        ),
        (
            DEGRADATION_EVENT,
            lambda: codec._timestamped_record(degradation_event()),
            "level",
            "L9",
            decode_degradation_event,
        ),
    ],
)
def test_a_value_its_enumeration_does_not_know_fails_validation(
    subject: str, record: Any, field: str, unknown: str, decode: Any
) -> None:
    written = record()
    written[field] = unknown
    data = write_single_object(BUNDLED.current(subject), written)

    _assert_decode_error(data, "fails validation", decode=decode)


# --- schema evolution ----------------------------------------------------------------------------


def _without_fields(schema: dict[str, Any], *names: str) -> dict[str, Any]:
    reduced = copy.deepcopy(schema)
    reduced["fields"] = [f for f in reduced["fields"] if f["name"] not in names]
    return reduced


def test_message_written_with_an_older_schema_decodes_with_the_current_one() -> None:
    # Given a "v0" plan schema without provenance and without detach_deleted_nodes
    old_schema = _without_fields(_raw_schema(PLAN), "provenance")
    mutation = next(f for f in old_schema["fields"] if f["name"] == "mutation")
    mutation["type"] = _without_fields(mutation["type"], "detach_deleted_nodes")
    del mutation["default"]
    old = schema_version(PLAN, 0, old_schema)
    catalogue = SchemaCatalogue([*BUNDLED.versions(), old])
    plan = rich_plan(
        mutation=rich_plan().mutation.model_copy(update={"detach_deleted_nodes": False}),
        provenance=Provenance(),
    )
    record = codec._plan_record(plan)
    del record["provenance"]
    del record["mutation"]["detach_deleted_nodes"]

    # When an old writer wrote it
    data = write_single_object(old, record)

    # Then the current reader fills the defaults and the plan is the same plan
    assert catalogue.current(PLAN) is BUNDLED.current(PLAN)
    assert data[2:HEADER_SIZE] == old.fingerprint != BUNDLED.current(PLAN).fingerprint
    decoded = decode_plan(data, catalogue=catalogue)
    assert decoded == plan
    decoded.verify_fingerprint()
    # and a reader that does not know the old schema refuses, rather than guessing
    _assert_decode_error(data, "unknown writer schema fingerprint")


def test_a_plan_written_with_plan_v1_decodes_and_keeps_its_fingerprint() -> None:
    # Given a plan frozen before states carried what they were planned with (a new document's:
    # plans onto a state name their base since plan.v3)
    state = rich_plan().next_state.model_copy(
        update={
            "schema_version": None,
            "extraction_fingerprint": None,
            "source_updated_at": None,
            "revision": 1,
            "base_operation_id": None,
            "kept_edge_keys": (),
        }
    )
    plan = rich_plan(
        next_state=state,
        expected_revision=0,
        base_operation_id=None,
        mutation=rich_plan().mutation.model_copy(update={"deletes_if_unreferenced": False}),
    )
    record = codec._plan_record(plan)
    del record["base_operation_id"]
    del record["mutation"]["deletes_if_unreferenced"]
    for name in (
        "schema_version",
        "extraction_fingerprint",
        "source_updated_at",
        "base_operation_id",
        "kept_edge_keys",
    ):
        del record["next_state"][name]
    v1 = schema_version(PLAN, 1, _raw_schema(PLAN, 1))
    assert BUNDLED.lookup(v1.fingerprint) is not None
    # When a plan.v1 writer wrote it
    data = write_single_object(v1, record)
    # Then the current reader decodes the same plan, its fingerprint unchanged
    decoded = decode_plan(data)
    assert decoded == plan
    assert decoded.next_state.schema_version is None
    decoded.verify_fingerprint()


def test_what_a_state_was_planned_with_is_part_of_the_fingerprint() -> None:
    plan = rich_plan()
    for change in (
        {"schema_version": "2027-01-01"},
        {"extraction_fingerprint": "v1:" + "ef" * 32},
    ):
        other = rich_plan(next_state=plan.next_state.model_copy(update=change))
        assert other.fingerprint != plan.fingerprint, change
    other_base = rich_plan(
        base_operation_id="op_other",
        next_state=plan.next_state.model_copy(update={"base_operation_id": "op_other"}),
    )
    assert other_base.fingerprint != plan.fingerprint
    unkept = rich_plan(next_state=plan.next_state.model_copy(update={"kept_edge_keys": ()}))
    assert unkept.fingerprint != plan.fingerprint
    unconditional = rich_plan(
        mutation=plan.mutation.model_copy(update={"deletes_if_unreferenced": False})
    )
    assert unconditional.fingerprint != plan.fingerprint
    later_source = plan.next_state.model_copy(update={"source_updated_at": AT})
    assert rich_plan(next_state=later_source).fingerprint == plan.fingerprint


def test_operation_written_with_an_older_schema_decodes_with_the_current_one() -> None:
    old = schema_version(
        OPERATION, 0, _without_fields(_raw_schema(OPERATION), "dlq_id", "next_retry_at", "attempts")
    )
    catalogue = SchemaCatalogue([*BUNDLED.versions(), old])
    op = failed_operation().model_copy(
        update={"dlq_id": None, "next_retry_at": None, "attempts": 0}
    )
    record = operation_record(op)
    for name in ("dlq_id", "next_retry_at", "attempts"):
        del record[name]

    decoded = decode_operation(write_single_object(old, record), catalogue=catalogue)

    assert decoded == op


# --- the catalogue -------------------------------------------------------------------------------


def test_bundled_catalogue_knows_every_subject() -> None:
    assert {(v.subject, v.version, v.name) for v in BUNDLED.versions()} >= {
        (PLAN, 1, "io.graphingest.IngestionPlan"),
        (OPERATION, 1, "io.graphingest.Operation"),
        (DLQ_ENVELOPE, 1, "io.graphingest.DlqEnvelope"),
        (DEGRADATION_EVENT, 1, "io.graphingest.DegradationEvent"),
        (INGEST_REQUEST, 1, "io.graphingest.IngestRequested"),
    }


def test_catalogue_rejects_a_second_schema_under_the_same_version() -> None:
    other = schema_version(PLAN, 1, _without_fields(_raw_schema(PLAN), "provenance"))

    with pytest.raises(ConfigurationError, match="differ"):
        SchemaCatalogue([*BUNDLED.versions(), other])


def test_catalogue_rejects_one_fingerprint_for_two_subjects() -> None:
    clash = schema_version("other", 1, _raw_schema(PLAN))

    with pytest.raises(ConfigurationError, match="fingerprint"):
        SchemaCatalogue([*BUNDLED.versions(), clash])


def test_schemas_are_parsed_once_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    plan_schema = BUNDLED.current(PLAN)
    operation_schema = BUNDLED.current(OPERATION)

    def no_parsing(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schema was parsed on the per-message path")

    monkeypatch.setattr(registry, "parse_schema", no_parsing)
    monkeypatch.setattr(registry, "schema_version", no_parsing)
    monkeypatch.setattr(registry, "load_bundled", no_parsing)
    plans = [rich_plan(document_version=f"v{i}") for i in range(1000)]
    op = failed_operation()

    for plan in plans:
        assert decode_plan(encode_plan(plan)).fingerprint == plan.fingerprint
        assert decode_operation(encode_operation(op)) == op

    assert BUNDLED.current(PLAN) is plan_schema
    assert BUNDLED.current(OPERATION) is operation_schema
    assert "__fastavro_parsed" in plan_schema.parsed


# --- the schemas mirror the domain models --------------------------------------------------------


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _record_in(avro_type: Any) -> dict[str, Any]:
    if isinstance(avro_type, list):
        return next(_record_in(t) for t in avro_type if isinstance(t, dict))
    if avro_type["type"] == "array":
        return _record_in(avro_type["items"])
    assert avro_type["type"] == "record"
    return typing.cast(dict[str, Any], avro_type)


def _assert_mirrors(record: dict[str, Any], model: type[BaseModel]) -> None:
    fields = {f["name"]: f["type"] for f in record["fields"]}
    assert list(fields) == list(model.model_fields), f"{record['name']} vs {model.__name__}"
    for name, info in model.model_fields.items():
        nested = _model_in(info.annotation)
        if nested is not None:
            _assert_mirrors(_record_in(fields[name]), nested)


@pytest.mark.parametrize(
    ("subject", "model"),
    [
        (PLAN, IngestionPlan),
        (OPERATION, Operation),
        (DLQ_ENVELOPE, DlqEnvelope),
        (DEGRADATION_EVENT, DegradationEvent),
        (INGEST_REQUEST, IngestRequest),
    ],
)
def test_schema_mirrors_the_domain_model_field_by_field(
    subject: str, model: type[BaseModel]
) -> None:
    _assert_mirrors(_record_in(expand_schema(_raw_schema(subject))), model)


def test_domain_module_types_are_what_the_mirror_test_walks() -> None:
    # Guard for the mirror test itself: it must reach nested models through unions and tuples.
    assert _model_in(ErrorInfo | None) is ErrorInfo
    assert _model_in(tuple[NodeUpsert, ...]) is NodeUpsert
