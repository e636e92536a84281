"""Messages of the DLQ and degradation topics as the projector consumes them: a plan's DLQ entry
through its life (dead-lettered, replayed, failed again, purged), a request's planning DLQ entry,
and a worker's degradation changes from the real monitor; each at offsets of one partition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graph_ingest.dlq.entries import dlq_id_of_operation, dlq_id_of_position
from graph_ingest.domain.degradation import DegradationEvent
from graph_ingest.domain.dlq import AttemptRecord, DlqEnvelope, DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.read_events import DegradationChange, DlqEvent
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.degradation import DegradationMonitor
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import encode_dlq_envelope
from graph_ingest.schemas.messages import dlq_envelope

AT = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
DLQ_TOPIC = "plans.dlq"
REQUESTS_TOPIC = "requests"
DEGRADATION_TOPIC = "degradation"
TRACE = "0af7651916cd43dd8448eb211c80319c"


def attempt(number: int, code: StatusCode = StatusCode.FAILED_PRECONDITION) -> AttemptRecord:
    return AttemptRecord(
        attempt=number,
        at=AT + timedelta(minutes=number),
        code=code,
        error_class="MissingNode",
        message=f"attempt {number}: no such node",
        worker_id="applier-1",
        code_version="test",
        trace_id=TRACE,
    )


def plan_entry_life(operation_id: str, document: str = "doc-1") -> list[DlqEnvelope]:
    """A plan's envelopes in publication order: dead-lettered, replayed, failed again, purged."""
    first = dlq_envelope(
        ("plans", 0, 7),
        f"it/{document}".encode(),
        b"plan bytes",
        [(kafka_headers.SUBMISSION_ID, b"sub-1")],
        [attempt(1)],
        at=AT,
        uncounted=2,
        operation_id=operation_id,
        fingerprint=f"fp-{operation_id}",
    )
    replayed = first.with_status(DlqStatus.REPLAYED, "replayed to plans")
    again = replayed.failed_again(attempt(4))
    return [first, replayed, again, again.with_status(DlqStatus.RESOLVED, "purged: obsolete")]


def request_entry(offset: int = 11) -> tuple[str, DlqEnvelope]:
    """A request the planner could not decode: its planning DLQ entry (id, envelope)."""
    envelope = dlq_envelope(
        (REQUESTS_TOPIC, 2, offset),
        b"it/doc-r",
        b"\x00 not a request",
        [(kafka_headers.SUBMISSION_ID, b"sub-r")],
        [attempt(1, StatusCode.INVALID_ARGUMENT)],
        at=AT,
    )
    return dlq_id_of_position(REQUESTS_TOPIC, 2, offset), envelope


def dlq_events(partition: int = 0) -> list[DlqEvent]:
    """Two plans' entries through their lives and a request's, interleaved, at offsets 0, 1, …"""
    keyed = [
        (dlq_id_of_operation(op), envelope)
        for envelopes in zip(plan_entry_life("op-1"), plan_entry_life("op-2", "doc-2"), strict=True)
        for op, envelope in zip(("op-1", "op-2"), envelopes, strict=True)
    ][:-1]  # op-2's entry is not purged
    keyed.append(request_entry())
    return [
        DlqEvent(DLQ_TOPIC, partition, offset, dlq_id, envelope, encode_dlq_envelope(envelope))
        for offset, (dlq_id, envelope) in enumerate(keyed)
    ]


def degradation_events(worker_id: str) -> list[DegradationEvent]:
    """One worker's changes from the real monitor: Neo4j opens (L1), PostgreSQL too (L2), Neo4j
    half-open (L2 still: no event), PostgreSQL closes (L1)."""
    now = [0.0]
    monitor = DegradationMonitor(
        worker_id, clock=lambda: now[0], wall_clock=lambda: AT + timedelta(seconds=now[0])
    )
    states = [
        {"neo4j": BreakerState.OPEN, "postgres": BreakerState.CLOSED},
        {"neo4j": BreakerState.OPEN, "postgres": BreakerState.OPEN},
        {"neo4j": BreakerState.HALF_OPEN, "postgres": BreakerState.OPEN},
        {"neo4j": BreakerState.HALF_OPEN, "postgres": BreakerState.CLOSED},
    ]
    events = []
    for step, observed in enumerate(states):
        now[0] = float(step)
        event = monitor.observe(observed)
        if event is not None:
            events.append(event)
    return events


def degradation_changes(*worker_ids: str) -> list[DegradationChange]:
    """The workers' changes at offsets 0, 1, … (each worker's in order)."""
    events = [e for worker in worker_ids for e in degradation_events(worker)]
    return [
        DegradationChange(DEGRADATION_TOPIC, 0, offset, event, event.at)
        for offset, event in enumerate(events)
    ]
