"""Replaying a DLQ entry, decided without I/O: which frozen plan goes back, or why none does.

A replay re-publishes the *frozen plan* with its own operation id to the plans topic, with the
header ``dlq_replay: <dlq id>``, the trace id of the entry's last attempt and the work headers
(``traceparent``, ``submission_id``) the plan first came with. The applier takes it
up like any plan; if it fails again, it returns to the same entry with its history extended (a
replayed message is never retried, so there is no loop). Nothing is re-planned, so what a frozen
plan can no longer do is refused here, saying what to do instead:

* a RESOLVED entry (kept for audit only), and a REPLAYED one unless forced;
* a stale plan: its operation is CONFLICT, or its document has committed a revision past the
  plan's expected revision (by another operation). It needs a replan;
* an operation that has COMPLETED meanwhile: there is nothing to replay;
* an entry that holds no plan (undecodable, or not what its fingerprint says), or a plan whose
  operation id is bound to another plan: it would only fail again. Purge it.
* a plan that followed the version before it to the DLQ while that one is still pending review:
  it would follow it there again at once. Replay that one; this one is released when it
  completes.

The plan is the operation's stored frozen plan when the operation exists (the bytes admission
stored), else the dead-lettered message's own value when that decodes and verifies.

A planning entry (a request that could not be planned: its original topic is the requests topic)
holds no plan: its replay submits the request again (``RequestReplay``), its key, value and
headers as the producer sent them, with ``dlq_replay: <dlq id>``; the planner plans it afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from graph_ingest.dlq.errors import DlqRefused
from graph_ingest.domain.admission import binding_mismatch
from graph_ingest.domain.dlq import DlqEnvelope, DlqStatus
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.schemas.codec import decode_ingest_request, decode_plan
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.schemas.plan_messages import sized_plan_message
from graph_ingest.schemas.request_messages import resubmitted_request
from graph_ingest.store.dlq_index import DlqEntry


class PlanSource(StrEnum):
    STORED = "stored"
    """The operation's frozen plan, as admission stored it."""
    ENVELOPE = "envelope"
    """The dead-lettered message's value (no operation holds the plan)."""
    REQUEST = "request"
    """A planning entry's ingest request, submitted again to the requests topic to be planned."""


@dataclass(frozen=True, slots=True)
class Replay:
    """A plan ready to go back to the plans topic for ``entry``."""

    entry: DlqEntry
    plan: IngestionPlan
    plan_bytes: bytes
    source: PlanSource
    trace_id: str
    waits_for: int | None = None
    """The revision the document must reach before the plan can apply (it parks until then);
    None when the document is at the plan's expected revision."""
    work_headers: Mapping[str, str] = field(default_factory=dict)
    """Whose work the plan is (``schemas.headers.WORK_HEADERS``): carried on the replay."""

    def message(self, topic: str, *, max_bytes: int) -> tuple[OutboxMessage, PlanClaim | None]:
        """The plan's message (a claim-check reference past ``max_bytes``, with the claim to
        store before it is published)."""
        return sized_plan_message(
            self.plan,
            topic,
            value=self.plan_bytes,
            max_bytes=max_bytes,
            headers={
                **self.work_headers,
                kafka_headers.DLQ_REPLAY: self.entry.dlq_id,
                kafka_headers.TRACE_ID: self.trace_id,
            },
        )


@dataclass(frozen=True, slots=True)
class RequestReplay:
    """A planning entry's ingest request, ready to go back to the requests topic: its key, value
    and headers as the producer sent them, with ``dlq_replay: <dlq id>``."""

    entry: DlqEntry
    outgoing: OutboxMessage
    source: PlanSource = PlanSource.REQUEST
    waits_for: int | None = None  # it is planned afresh: nothing to wait for


def request_replay(entry: DlqEntry, envelope: DlqEnvelope) -> RequestReplay:
    """The replay of a planning entry (its original topic the requests topic); DlqRefused when it
    holds no request (undecodable: it would only fail again)."""
    try:
        decode_ingest_request(envelope.original_value or b"")
    except Exception as exc:  # hostile bytes may raise anything in third-party code
        raise DlqRefused(
            f"entry {entry.dlq_id} holds no ingest request that can be replayed "
            f"({type(exc).__name__}: {exc}): purge it with a reason "
            "(`graph-ingest dlq purge ID --reason …`)"
        ) from exc
    assert envelope.original_value is not None  # it decoded
    return RequestReplay(
        entry=entry,
        outgoing=resubmitted_request(
            envelope.original_topic,
            envelope.original_key,
            envelope.original_value,
            [(h.key, h.value) for h in envelope.original_headers],
            {kafka_headers.DLQ_REPLAY: entry.dlq_id},
        ),
    )


def status_refusal(entry: DlqEntry, *, force: bool) -> str | None:
    """Why the entry's status forbids a replay, or None."""
    if entry.status is DlqStatus.RESOLVED:
        return f"entry {entry.dlq_id} is RESOLVED (purged, kept for audit): it is not replayed"
    if entry.status is DlqStatus.REPLAYED and not force:
        return (
            f"entry {entry.dlq_id} was REPLAYED already: pass --force to replay it again "
            "(the applier treats a plan it has completed as a duplicate)"
        )
    return None


def decoded_plan(value: bytes | None) -> IngestionPlan | str:
    """The verified plan in ``value``, or why it is none. Hostile bytes make third-party code
    raise its own exceptions: every one of them means "no plan", as in the applier."""
    if not value:
        return "the message has no value"
    try:
        plan = decode_plan(value)
        plan.verify_fingerprint()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return plan


def choose_plan(
    entry: DlqEntry,
    envelope: DlqEnvelope,
    operation: Operation | None,
    stored: bytes | None,
) -> tuple[IngestionPlan, bytes, PlanSource]:
    """The plan to replay and where it comes from; DlqRefused when there is none to replay."""
    if operation is not None and stored is not None:
        if envelope.fingerprint is not None and envelope.fingerprint != operation.fingerprint:
            raise DlqRefused(
                f"entry {entry.dlq_id}: operation {operation.operation_id} is bound to another "
                f"plan ({operation.fingerprint}), not this entry's ({envelope.fingerprint}); "
                "replayed, it would be rejected again: purge the entry"
            )
        plan = decoded_plan(stored)
        mismatch = binding_mismatch(operation, plan) if isinstance(plan, IngestionPlan) else plan
        if mismatch or not isinstance(plan, IngestionPlan):
            raise DlqRefused(
                f"entry {entry.dlq_id}: the stored frozen plan of operation "
                f"{operation.operation_id} cannot be replayed: {mismatch}"
            )
        return plan, stored, PlanSource.STORED
    plan = decoded_plan(envelope.original_value)
    if not isinstance(plan, IngestionPlan):
        raise DlqRefused(
            f"entry {entry.dlq_id} holds no plan that can be replayed ({plan}): purge it "
            "with a reason (`graph-ingest dlq purge ID --reason …`)"
        )
    assert envelope.original_value is not None  # it decoded
    return plan, envelope.original_value, PlanSource.ENVELOPE


def plan_refusal(
    plan: IngestionPlan, operation: Operation | None, committed: DocumentState | None
) -> str | None:
    """Why the plan cannot be applied any more (stale: a replan is needed; or done), or None."""
    where = f"{plan.space}/{plan.document_id}"
    if operation is not None and operation.stage is Stage.CONFLICT:
        return (
            f"operation {plan.operation_id} is CONFLICT: its plan is stale (document {where} "
            f"moved past revision {plan.expected_revision}), a replan is needed; replaying the "
            "frozen plan cannot apply it (purge the entry once replanned)"
        )
    if operation is not None and operation.stage is Stage.COMPLETED:
        return (
            f"operation {plan.operation_id} is COMPLETED: there is nothing to replay "
            "(purge the entry with a reason)"
        )
    if (
        committed is not None
        and committed.revision > plan.expected_revision
        and committed.operation_id != plan.operation_id
    ):
        return (
            f"CONFLICT: document {where} is at revision {committed.revision}, past the plan's "
            f"expected revision {plan.expected_revision}: the plan is stale, a replan is needed "
            "(purge the entry once replanned)"
        )
    return None


def leader_refusal(
    entry: DlqEntry, leader: Operation | None, leader_entry: DlqEntry | None
) -> str | None:
    """Why the entry must wait for the operation it followed to the DLQ (``leader``, with its own
    entry), or None: that one is still dead-lettered and pending review."""
    if entry.parked_behind is None or leader is None or leader_entry is None:
        return None
    if leader.stage is not Stage.DEAD_LETTERED:
        return None
    if leader_entry.status is not DlqStatus.PENDING_REVIEW:
        return None
    return (
        f"entry {entry.dlq_id} waits behind operation {leader.operation_id}, which is in the DLQ "
        f"too ({leader_entry.dlq_id}, PENDING_REVIEW): replay that one; this one is released "
        "when it completes"
    )


def waits_for(plan: IngestionPlan, committed: DocumentState | None) -> int | None:
    current = committed.revision if committed else 0
    return plan.expected_revision if current < plan.expected_revision else None


__all__ = [
    "PlanSource",
    "Replay",
    "RequestReplay",
    "choose_plan",
    "decoded_plan",
    "leader_refusal",
    "plan_refusal",
    "request_replay",
    "status_refusal",
    "waits_for",
]
