"""Resume / recover without services: refusals, the resume message, the run's rules
(per-item isolation, stop on a service failure, the lease deadline) and its output."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.recovery import (
    exit_code,
    item_line,
    report_json,
    summary_line,
)
from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import KafkaIngestError, KafkaUnavailable
from graph_ingest.kafka.producer import ProducerMessage
from graph_ingest.producers.recovery import (
    RECOVERABLE_STAGES,
    Action,
    NotResumable,
    Recovered,
    Recoverer,
    RecoveryReport,
    StoredPlanUnusable,
    refusal,
    resume_message,
)
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import CLAIM_CHECK_VERSION, PlanClaim, parse_claim_reference
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.schemas.plan_messages import plan_message
from graph_ingest.settings.recovery import RecoverySettings
from graph_ingest.store.recovery import RecoveryClaim
from tests.unit.plans import operation_of as plan_operation
from tests.unit.plans import plan_for

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TOPIC = "ingestion.plans"
MAX_BYTES = 1_000_000


def operation_of(plan: IngestionPlan, stage: Stage = Stage.FAILED, minutes: int = 0) -> Operation:
    return plan_operation(plan, stage, T0 + timedelta(minutes=minutes))


def claim_of(
    plan: IngestionPlan, *, plan_bytes: bytes | None = None, **op: object
) -> RecoveryClaim:
    return RecoveryClaim(
        operation=operation_of(plan, **op),  # type: ignore[arg-type]
        plan_bytes=encode_plan(plan) if plan_bytes is None else plan_bytes,
        claimed_by="recover@test",
        lease_until=T0 + timedelta(minutes=5),
        claims=1,
    )


def test_a_lease_must_outlast_the_publish_it_protects() -> None:
    with pytest.raises(ValidationError, match="lease_s"):
        RecoverySettings(lease_s=10, publish_timeout_s=30)


# -- what may be resumed, and the message that resumes it -------------------------------------


def test_completed_conflict_and_dead_lettered_are_refused_with_a_reason() -> None:
    plan = plan_for("doc-1")
    assert "nothing to resume" in (refusal(operation_of(plan, Stage.COMPLETED)) or "")
    stale = refusal(operation_of(plan, Stage.CONFLICT)) or ""
    assert "stale" in stale and "replan is needed" in stale
    dead = refusal(operation_of(plan, Stage.DEAD_LETTERED)) or ""
    assert "leaves the DLQ by a replay" in dead and "graph-ingest dlq replay" in dead
    for stage in Stage:
        if stage not in (Stage.COMPLETED, Stage.CONFLICT, Stage.DEAD_LETTERED):
            assert refusal(operation_of(plan, stage)) is None, stage


def test_recover_leaves_dead_lettered_operations_to_a_person() -> None:
    assert Stage.DEAD_LETTERED not in RECOVERABLE_STAGES
    assert {Stage.PREPARED, Stage.FAILED, Stage.PARKED, Stage.GRAPH_APPLIED} <= RECOVERABLE_STAGES


def test_the_resume_message_is_the_stored_plan_unchanged_with_the_plan_headers() -> None:
    plan = plan_for("doc-1")
    stored = encode_plan(plan)
    message, claim = resume_message(
        claim_of(plan, plan_bytes=stored), TOPIC, via="recover", max_bytes=MAX_BYTES
    )
    original = plan_message(plan, TOPIC)
    assert claim is None
    assert message.value is stored
    assert message.key == original.key == b"unit/doc-1"
    assert message.topic == TOPIC
    assert message.headers == {**original.headers, "resumed": "recover"}


def test_stored_bytes_that_do_not_decode_are_unusable() -> None:
    with pytest.raises(StoredPlanUnusable, match="cannot be decoded"):
        resume_message(
            claim_of(plan_for("doc-1"), plan_bytes=b"\x00garbage"),
            TOPIC,
            via="x",
            max_bytes=MAX_BYTES,
        )


def test_stored_bytes_of_another_plan_are_unusable() -> None:
    claim = claim_of(plan_for("doc-1"), plan_bytes=encode_plan(plan_for("doc-2")))
    with pytest.raises(StoredPlanUnusable, match="not the one the operation is bound to"):
        resume_message(claim, TOPIC, via="x", max_bytes=MAX_BYTES)


# -- a recover run ---------------------------------------------------------------------------


class FakeStore:
    def __init__(self, claims: list[RecoveryClaim]) -> None:
        self.claims = claims
        self.released: list[str] = []
        self.plan_claims: list[PlanClaim] = []

    def claim_for_recovery(
        self,
        *,
        stages: Collection[Stage],
        older_than_s: float,
        limit: int,
        claimer: str,
        lease_s: float,
    ) -> list[RecoveryClaim]:
        assert set(stages) == RECOVERABLE_STAGES
        return self.claims[:limit]

    def claim_operation(
        self, operation_id: str, *, stages: Collection[Stage], claimer: str, lease_s: float
    ) -> RecoveryClaim | None:
        return next((c for c in self.claims if c.operation.operation_id == operation_id), None)

    def stranded_parked(self, *, older_than_s: float, limit: int) -> list[Operation]:
        return []

    def release_recovery_claim(self, operation_id: str, claimer: str) -> bool:
        self.released.append(operation_id)
        return True

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        self.plan_claims.extend(claims)


class FakeProducer:
    """Stands in for Kafka in these tests of the run's rules only (the integration tests use
    the real one): refuses the documents in ``refuse`` with the given error."""

    def __init__(self, refuse: dict[str, Exception] | None = None) -> None:
        self.refuse = refuse or {}
        self.sent: list[bytes] = []
        self.messages: list[ProducerMessage] = []

    def start(self) -> None:
        pass

    def produce_batch(
        self, messages: Sequence[ProducerMessage], *, timeout_s: float | None = None
    ) -> None:
        for message in messages:
            key = message.key or b""
            if key.decode() in self.refuse:
                raise self.refuse[key.decode()]
            self.sent.append(key)
            self.messages.append(message)


def run(
    claims: list[RecoveryClaim],
    producer: FakeProducer,
    clock: list[float] | None = None,
    max_bytes: int = MAX_BYTES,
) -> tuple[RecoveryReport, FakeStore]:
    store = FakeStore(claims)
    ticks = iter(clock or [])
    recoverer = Recoverer(
        store,
        producer,
        TOPIC,
        RecoverySettings(lease_s=60, publish_timeout_s=10),
        max_message_bytes=max_bytes,
        monotonic=lambda: next(ticks, 0.0),
    )
    return recoverer.recover(older_than_s=300, limit=10), store


def test_a_plan_past_the_size_limit_is_recovered_as_a_claim_reference_its_claim_stored_first() -> (
    None
):
    plan = plan_for("doc-1")
    stored = encode_plan(plan)
    producer = FakeProducer()
    report, store = run([claim_of(plan, plan_bytes=stored)], producer, max_bytes=len(stored))

    assert report.count(Action.RESUMED) == 1
    assert store.plan_claims == [PlanClaim(plan.operation_id, plan.fingerprint, stored)]
    (message,) = producer.messages
    assert message.headers[kafka_headers.CLAIM_CHECK] == CLAIM_CHECK_VERSION
    assert message.headers[kafka_headers.RESUMED] == "recover"
    assert parse_claim_reference(message.value).key == (plan.operation_id, plan.fingerprint)


def test_one_plan_that_cannot_be_resumed_does_not_stop_the_others() -> None:
    plans = [plan_for(f"doc-{i}") for i in range(3)]
    claims = [claim_of(p, minutes=i) for i, p in enumerate(plans)]
    claims[1] = claim_of(plans[1], plan_bytes=b"\x00garbage", minutes=1)
    producer = FakeProducer(
        {"unit/doc-2": KafkaIngestError("too large", code=StatusCode.INVALID_ARGUMENT)}
    )

    report, store = run(claims, producer)

    assert [i.action for i in report.items] == [Action.RESUMED, Action.FAILED, Action.FAILED]
    assert producer.sent == [b"unit/doc-0"]
    assert store.released == [plans[1].operation_id, plans[2].operation_id]
    assert report.items[1].error is not None and report.items[1].error.code == "DATA_LOSS"
    assert exit_code(report) is ExitCode.ERROR


def test_a_service_failure_ends_the_run_and_releases_the_rest() -> None:
    plans = [plan_for(f"doc-{i}") for i in range(3)]
    producer = FakeProducer({"unit/doc-0": KafkaUnavailable("broker down")})

    report, store = run([claim_of(p) for p in plans], producer)

    assert [i.action for i in report.items] == [Action.FAILED, Action.SKIPPED, Action.SKIPPED]
    assert producer.sent == []
    assert store.released == [p.operation_id for p in plans]
    assert exit_code(report) is ExitCode.UNAVAILABLE


def test_nothing_is_published_once_the_lease_could_end_before_the_ack() -> None:
    plans = [plan_for(f"doc-{i}") for i in range(3)]
    # claimed at 0 (lease 60 s, publish timeout 10 s): doc-1 checked at 45, doc-2 at 51
    report, store = run([claim_of(p) for p in plans], FakeProducer(), clock=[0, 1, 45, 51])

    assert [i.action for i in report.items] == [Action.RESUMED, Action.RESUMED, Action.SKIPPED]
    assert store.released == [plans[2].operation_id]
    assert report.items[2].error is not None
    assert report.items[2].error.error_class == "LeaseRunningOut"
    assert exit_code(report) is ExitCode.ERROR


def test_resume_refuses_a_completed_operation_before_claiming_anything() -> None:
    plan = plan_for("doc-1")
    store = FakeStore([])
    recoverer = Recoverer(
        store, FakeProducer(), TOPIC, RecoverySettings(), max_message_bytes=MAX_BYTES
    )
    with pytest.raises(NotResumable, match="COMPLETED"):
        recoverer.resume(operation_of(plan, Stage.COMPLETED))


# -- output ----------------------------------------------------------------------------------


def report_of(*items: Recovered) -> RecoveryReport:
    return RecoveryReport(
        claimed_by="recover@h:1:ab", older_than_s=300, limit=100, lease_s=300, items=items
    )


def test_the_report_prints_one_line_per_operation_and_a_summary() -> None:
    ok = Recovered(operation_of(plan_for("doc-1"), Stage.GRAPH_APPLIED), Action.RESUMED, 1)
    bad = Recovered(
        operation_of(plan_for("doc-2"), Stage.PARKED),
        Action.FAILED,
        2,
        ErrorInfo(code=StatusCode.DATA_LOSS, error_class="StoredPlanUnusable", message="bad bytes"),
    )
    report = report_of(ok, bad)

    assert item_line(ok) == f"resumed  {ok.operation.operation_id} GRAPH_APPLIED   unit/doc-1"
    assert item_line(bad).endswith("PARKED          unit/doc-2: DATA_LOSS bad bytes")
    assert summary_line(report) == (
        "recover: 2 claimed: 1 resumed, 1 failed, 0 skipped "
        "(older than 5m, limit 100, lease 5m; by recover@h:1:ab)"
    )
    shaped = json.loads(json.dumps(report_json(report)))
    assert shaped["summary"] == {
        "claimed": 2,
        "resumed": 1,
        "failed": 1,
        "skipped": 0,
        "stranded": 0,
    }
    assert shaped["stranded"] == []
    assert shaped["operations"][0] == {
        "operation_id": ok.operation.operation_id,
        "space": "unit",
        "document_id": "doc-1",
        "stage": "GRAPH_APPLIED",
        "updated_at": T0.isoformat(),
        "action": "resumed",
        "claims": 1,
        "error": None,
    }
    assert shaped["operations"][1]["error"]["code"] == "DATA_LOSS"
    assert shaped["claimed_by"] == "recover@h:1:ab"


def test_an_empty_run_says_so_and_succeeds() -> None:
    report = report_of()
    assert (
        summary_line(report) == "recover: nothing to recover (older than 5m, limit 100, lease 5m)"
    )
    assert exit_code(report) is ExitCode.OK
    assert report_json(report)["operations"] == []
