"""Resolving claim-check references: the stored plan, verified, or poison with the reason."""

from __future__ import annotations

import pytest

from graph_ingest.consumers.applier.claims import resolve_claims
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import ClaimReference, PlanClaim, parse_claim_reference
from graph_ingest.schemas.codec import DecodeError, encode_plan
from graph_ingest.schemas.messages import message_size
from graph_ingest.schemas.plan_messages import sized_plan_message
from tests.unit.plans import plan_for

pytestmark = pytest.mark.timeout(30)

PLAN = plan_for("doc-1")
ENCODED = encode_plan(PLAN)
REFERENCE = ClaimReference(PLAN.operation_id, PLAN.fingerprint, len(ENCODED))


def claimed(reference: ClaimReference = REFERENCE, offset: int = 0) -> PlanMessage:
    value = reference.encode()
    return PlanMessage("plans", 0, offset, b"k", None, claim=reference, claim_value=value)


def test_a_reference_round_trips_and_garbage_is_a_decode_error() -> None:
    assert parse_claim_reference(REFERENCE.encode()) == REFERENCE
    for bad in (b"", b"{}", b'{"claim_check":"v2"}', b"\xff", b'{"claim_check":"v1","bytes":1}'):
        with pytest.raises(DecodeError):
            parse_claim_reference(bad)


def test_a_stored_plan_is_resolved_and_the_message_keeps_its_wire_value() -> None:
    plain = PlanMessage("plans", 0, 1, b"k", b"bytes", plan=PLAN)
    asked: list[list[tuple[str, str]]] = []

    def lookup(keys: object) -> dict[tuple[str, str], bytes]:
        asked.append(list(keys))  # type: ignore[call-overload]
        return {REFERENCE.key: ENCODED}

    resolved, untouched = resolve_claims([claimed(), plain], lookup)

    assert asked == [[REFERENCE.key]]  # one lookup for the batch
    assert resolved.plan == PLAN and resolved.value == ENCODED and resolved.error is None
    assert resolved.wire_value == REFERENCE.encode()
    assert untouched is plain


def test_no_lookup_when_nothing_is_claim_checked() -> None:
    def lookup(keys: object) -> dict[tuple[str, str], bytes]:
        raise AssertionError("looked up")

    assert resolve_claims([], lookup) == []


@pytest.mark.parametrize(
    ("stored", "code"),
    [
        ({}, StatusCode.DATA_LOSS),
        ({REFERENCE.key: encode_plan(plan_for("doc-2"))}, StatusCode.DATA_LOSS),
        ({REFERENCE.key: ENCODED[:-3]}, StatusCode.INVALID_ARGUMENT),
    ],
    ids=["not stored", "another plan", "truncated"],
)
def test_a_claim_without_its_plan_is_poison(
    stored: dict[tuple[str, str], bytes], code: StatusCode
) -> None:
    (message,) = resolve_claims([claimed()], lambda keys: stored)

    assert message.plan is None
    assert message.error is not None and message.error.code is code


def test_a_plan_message_is_the_plan_up_to_the_limit_and_a_reference_past_it() -> None:
    headers = {kafka_headers.RELEASED: "parked"}
    whole, claim = sized_plan_message(
        PLAN, "plans", value=ENCODED, max_bytes=10**6, headers=headers
    )
    assert claim is None and whole.value is ENCODED
    fits = message_size(whole)

    same, claim = sized_plan_message(PLAN, "plans", value=ENCODED, max_bytes=fits, headers=headers)
    assert claim is None and same == whole

    over, claim = sized_plan_message(
        PLAN, "plans", value=ENCODED, max_bytes=fits - 1, headers=headers
    )
    assert claim == PlanClaim(PLAN.operation_id, PLAN.fingerprint, ENCODED)
    assert parse_claim_reference(over.value) == REFERENCE
    assert over.headers[kafka_headers.CLAIM_CHECK] == "v1"
    assert over.headers[kafka_headers.RELEASED] == "parked"  # the caller's headers are kept
    assert over.key == whole.key
