"""What a DLQ replay sends, or why it refuses, decided without services."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graph_ingest.dlq.errors import DlqRefused
from graph_ingest.dlq.replay import (
    PlanSource,
    Replay,
    choose_plan,
    decoded_plan,
    leader_refusal,
    plan_refusal,
    status_refusal,
    waits_for,
)
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_plan
from graph_ingest.schemas.plan_messages import plan_message
from tests.unit.dlq_entries import committed, entry_for, operation_of
from tests.unit.dlq_envelopes import TRACE_ID
from tests.unit.plans import plan_for

TOPIC = "ingestion.plans"


@pytest.mark.parametrize(
    ("status", "force", "refused"),
    [
        (DlqStatus.PENDING_REVIEW, False, None),
        (DlqStatus.REPLAYED, False, "REPLAYED already: pass --force"),
        (DlqStatus.REPLAYED, True, None),
        (DlqStatus.RESOLVED, False, "RESOLVED"),
        (DlqStatus.RESOLVED, True, "RESOLVED"),
    ],
)
def test_only_pending_entries_replay_and_replayed_ones_when_forced(
    status: DlqStatus, force: bool, refused: str | None
) -> None:
    entry = replace(entry_for(plan_for("doc-1")), status=status)
    reason = status_refusal(entry, force=force)
    assert reason is None if refused is None else refused in (reason or "")


# -- which plan --------------------------------------------------------------------------------


def test_the_operations_stored_plan_is_replayed_when_the_operation_exists() -> None:
    plan = plan_for("doc-1")
    entry = entry_for(plan)
    stored = encode_plan(plan)
    chosen = choose_plan(entry, decode_dlq_envelope(entry.envelope), operation_of(plan), stored)
    assert chosen == (plan, stored, PlanSource.STORED)
    assert chosen[1] is stored


def test_without_an_operation_the_dead_lettered_message_is_replayed_if_it_is_a_plan() -> None:
    plan = plan_for("doc-1")
    entry = entry_for(plan)
    envelope = decode_dlq_envelope(entry.envelope)
    assert choose_plan(entry, envelope, None, None) == (
        plan,
        envelope.original_value,
        PlanSource.ENVELOPE,
    )


@pytest.mark.parametrize(
    "value",
    [
        b"\x00junk",
        b"",
        None,
        encode_plan(plan_for("doc-1").model_copy(update={"document_version": "9"})),
    ],
    ids=["undecodable", "empty", "none", "tampered"],
)
def test_an_entry_that_holds_no_plan_is_refused_with_purge_suggested(value: bytes | None) -> None:
    entry = entry_for(None, original_value=value)
    with pytest.raises(DlqRefused, match=r"holds no plan that can be replayed .*purge"):
        choose_plan(entry, decode_dlq_envelope(entry.envelope), None, None)


def test_a_plan_whose_operation_is_bound_to_another_plan_is_refused() -> None:
    plan, impostor = plan_for("doc-1"), plan_for("doc-1", "Alice works at Acme, told otherwise.")
    entry = entry_for(impostor, operation_id=plan.operation_id)
    with pytest.raises(DlqRefused, match=r"bound to another plan.*purge"):
        choose_plan(
            entry, decode_dlq_envelope(entry.envelope), operation_of(plan), encode_plan(plan)
        )


def test_stored_bytes_that_are_no_longer_the_operations_plan_are_refused() -> None:
    plan = plan_for("doc-1")
    entry = entry_for(plan)
    envelope = decode_dlq_envelope(entry.envelope)
    for rotten in (b"\x00rot", encode_plan(plan_for("doc-2"))):
        with pytest.raises(DlqRefused, match=r"stored frozen plan .* cannot be replayed"):
            choose_plan(entry, envelope, operation_of(plan), rotten)


def test_decoded_plan_says_why_bytes_are_no_plan() -> None:
    plan = plan_for("doc-1")
    assert decoded_plan(encode_plan(plan)) == plan
    assert "DecodeError" in str(decoded_plan(b"\x00junk"))
    assert decoded_plan(None) == "the message has no value"


# -- stale or done -----------------------------------------------------------------------------


def test_a_conflict_operation_needs_a_replan() -> None:
    plan = plan_for("doc-1")
    reason = plan_refusal(plan, operation_of(plan, Stage.CONFLICT), None) or ""
    assert "CONFLICT" in reason and "a replan is needed" in reason


def test_a_document_committed_past_the_expected_revision_by_another_plan_needs_a_replan() -> None:
    plan = plan_for("doc-1")  # expects revision 0
    reason = plan_refusal(plan, operation_of(plan), committed(plan, 1)) or ""
    assert "CONFLICT" in reason and "a replan is needed" in reason
    assert "at revision 1, past the plan's expected revision 0" in reason
    # the plan's own commit is no conflict: admission repairs the operation log
    assert plan_refusal(plan, operation_of(plan), committed(plan, 1, plan.operation_id)) is None


def test_a_completed_operation_has_nothing_to_replay() -> None:
    plan = plan_for("doc-1")
    assert "nothing to replay" in (
        plan_refusal(plan, operation_of(plan, Stage.COMPLETED), None) or ""
    )


@pytest.mark.parametrize("stage", [Stage.DEAD_LETTERED, Stage.FAILED, Stage.PARKED, Stage.PREPARED])
def test_an_operation_still_to_finish_replays(stage: Stage) -> None:
    plan = plan_for("doc-1")
    assert plan_refusal(plan, operation_of(plan, stage), None) is None
    assert plan_refusal(plan, None, None) is None


def test_a_follower_waits_while_the_version_it_followed_to_the_dlq_is_pending() -> None:
    leader_plan = plan_for("doc-1")
    follower = replace(entry_for(plan_for("doc-1", "Alice left."), 2), parked_behind="op-leader")
    leader = operation_of(leader_plan).model_copy(
        update={"operation_id": "op-leader", "dlq_id": "dlq-01"}
    )
    pending = entry_for(leader_plan, 1)

    reason = leader_refusal(follower, leader, pending) or ""

    assert "waits behind operation op-leader" in reason and "replay that one" in reason
    assert leader_refusal(follower, leader, replace(pending, status=DlqStatus.REPLAYED)) is None
    assert (
        leader_refusal(follower, leader.model_copy(update={"stage": Stage.PARKED}), pending) is None
    )
    assert leader_refusal(replace(follower, parked_behind=None), leader, pending) is None
    assert leader_refusal(follower, None, None) is None


def test_a_plan_ahead_of_its_document_waits_for_its_revision() -> None:
    first = plan_for("doc-1")
    second = plan_for("doc-1", "Alice left.").model_copy(update={"expected_revision": 1})
    assert waits_for(first, None) is None
    assert waits_for(second, None) == 1
    assert waits_for(second, committed(first, 1, first.operation_id)) is None


# -- the message ------------------------------------------------------------------------------


def test_the_replay_message_is_the_frozen_plan_with_the_entry_and_its_trace() -> None:
    plan = plan_for("doc-1")
    stored = encode_plan(plan)
    entry = entry_for(plan)
    message, claim = Replay(entry, plan, stored, PlanSource.STORED, TRACE_ID).message(
        TOPIC, max_bytes=1_000_000
    )
    original = plan_message(plan, TOPIC)
    assert claim is None
    assert message.value is stored
    assert (message.topic, message.key) == (TOPIC, b"unit/doc-1")
    assert message.headers == {
        **original.headers,
        kafka_headers.DLQ_REPLAY: entry.dlq_id,
        kafka_headers.TRACE_ID: TRACE_ID,
    }
