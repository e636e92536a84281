"""The rules of a replay-all run, without services: each entry at most once per run, a refusal
isolated, a service failure or a stop ends it, a mark only on the envelope that was replayed,
the rate.
The integration tests (test_dlq_cli.py) run the same against the real Kafka and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from graph_ingest.dlq.entries import entry_of
from graph_ingest.dlq.replayer import Action, DlqReplayer, Throttle
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import Operation
from graph_ingest.kafka.errors import KafkaUnavailable
from graph_ingest.kafka.producer import ProducerMessage
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_plan
from graph_ingest.schemas.messages import OutboxMessage
from graph_ingest.settings import Settings
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery
from tests.unit.dlq_entries import entry_for, operation_of
from tests.unit.dlq_envelopes import attempt
from tests.unit.plans import plan_for


class FakeUnitOfWork:
    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def dlq_entries(self, dlq_ids: Sequence[str]) -> dict[str, DlqEntry]:
        return {i: self.store.entries[i] for i in dlq_ids if i in self.store.entries}

    def put_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        self.store.entries.update((e.dlq_id, e) for e in entries)

    def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        self.store.outbox.extend(messages)


class FakeStore:
    """The DLQ index and the operations of the entries, in memory."""

    def __init__(self, entries: Sequence[DlqEntry], operations: Sequence[Operation] = ()) -> None:
        self.entries = {e.dlq_id: e for e in entries}
        self.operations = {op.operation_id: op for op in operations}
        self.plans: dict[str, bytes] = {}
        self.outbox: list[OutboxMessage] = []

    def list_dlq_entries(self, query: DlqQuery) -> list[DlqEntry]:
        found = sorted(
            (e for e in self.entries.values() if e.status is query.status),
            key=lambda e: (e.dead_lettered_at, e.dlq_id),
        )
        if query.after is not None:
            found = [e for e in found if (e.dead_lettered_at, e.dlq_id) > query.after]
        return found[: query.limit]

    def count_dlq_entries(self, query: DlqQuery) -> int:
        return len(self.list_dlq_entries(replace(query, limit=None)))

    def get_dlq_entry(self, dlq_id: str) -> DlqEntry | None:
        return self.entries.get(dlq_id)

    def get_operation(self, operation_id: str) -> Operation | None:
        return self.operations.get(operation_id)

    def get_plan_bytes(self, operation_id: str) -> bytes | None:
        return self.plans.get(operation_id)

    def get_work_headers(self, operation_id: str) -> dict[str, str]:
        return {}

    def get_document_state(self, space: str, document_id: str) -> None:
        return None

    @contextmanager
    def unit_of_work(self) -> Iterator[FakeUnitOfWork]:
        yield FakeUnitOfWork(self)


class FakeProducer:
    """Stands in for Kafka in these tests of the run's rules only; ``after_send`` plays the
    applier (a replay that fails again), ``fail`` a broker that is down."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.after_send: Callable[[str], None] = lambda dlq_id: None
        self.fail: Exception | None = None

    def start(self) -> None:
        pass

    def produce_batch(
        self, messages: Sequence[ProducerMessage], *, timeout_s: float | None = None
    ) -> None:
        if self.fail is not None:
            raise self.fail
        for message in messages:
            dlq_id = str(message.headers["dlq_replay"])
            self.sent.append(dlq_id)
            self.after_send(dlq_id)


def setup(count: int, **store: Any) -> tuple[DlqReplayer, FakeStore, FakeProducer]:
    plans = [plan_for(f"doc-{i}") for i in range(count)]
    fake = FakeStore([entry_for(plan, i + 1) for i, plan in enumerate(plans)], **store)
    producer = FakeProducer()
    return DlqReplayer(fake, producer, Settings()), fake, producer  # type: ignore[arg-type]


def test_every_pending_entry_is_replayed_once_oldest_first_and_marked() -> None:
    replayer, store, producer = setup(3)
    store.entries["dlq-02"] = replace(store.entries["dlq-02"], status=DlqStatus.RESOLVED)

    report = replayer.replay_all(DlqQuery())

    assert producer.sent == ["dlq-01", "dlq-03"]
    assert [i.action for i in report.items] == [Action.REPLAYED, Action.REPLAYED]
    assert {e.dlq_id: e.status for e in store.entries.values()} == {
        "dlq-01": DlqStatus.REPLAYED,
        "dlq-02": DlqStatus.RESOLVED,
        "dlq-03": DlqStatus.REPLAYED,
    }
    assert [m.key for m in store.outbox] == [b"dlq-01", b"dlq-03"]  # the new envelopes
    assert (report.interrupted, report.stopped) == (False, None)


def test_a_replay_that_fails_again_at_once_is_not_marked_and_not_replayed_again() -> None:
    replayer, store, producer = setup(2)

    def fail_again(dlq_id: str) -> None:  # the applier routes it back, later in the order
        entry = store.entries[dlq_id]
        envelope = decode_dlq_envelope(entry.envelope)
        back = envelope.with_attempt(attempt(9)).model_copy(
            update={"dead_lettered_at": envelope.dead_lettered_at + timedelta(hours=1)}
        )
        store.entries[dlq_id] = entry_of(dlq_id, back)

    producer.after_send = fail_again

    report = replayer.replay_all(DlqQuery())

    assert producer.sent == ["dlq-01", "dlq-02"]
    assert [i.action for i in report.items] == [Action.REPLAYED, Action.REPLAYED]
    assert all("changed meanwhile" in (i.reason or "") for i in report.items)
    assert {e.status for e in store.entries.values()} == {DlqStatus.PENDING_REVIEW}
    assert {e.attempts for e in store.entries.values()} == {5}


def test_an_entry_no_longer_pending_when_its_turn_comes_is_left_alone() -> None:
    replayer, store, producer = setup(3)

    def purge_the_next(dlq_id: str) -> None:  # another operator, while this run is at dlq-01
        if dlq_id == "dlq-01":
            store.entries["dlq-02"] = replace(store.entries["dlq-02"], status=DlqStatus.RESOLVED)

    producer.after_send = purge_the_next

    report = replayer.replay_all(DlqQuery())

    assert producer.sent == ["dlq-01", "dlq-03"]
    assert [i.entry.dlq_id for i in report.items] == ["dlq-01", "dlq-03"]
    assert store.entries["dlq-02"].status is DlqStatus.RESOLVED


def test_a_refused_entry_is_reported_and_the_others_go_on() -> None:
    replayer, store, _producer = setup(2)
    store.entries["dlq-00"] = replace(entry_for(None, 0), dlq_id="dlq-00")

    report = replayer.replay_all(DlqQuery())

    assert [(i.entry.dlq_id, i.action) for i in report.items] == [
        ("dlq-00", Action.REFUSED),
        ("dlq-01", Action.REPLAYED),
        ("dlq-02", Action.REPLAYED),
    ]
    assert "purge" in (report.items[0].reason or "")
    assert store.entries["dlq-00"].status is DlqStatus.PENDING_REVIEW


def test_a_follower_waits_for_its_leader_unless_the_leader_was_replayed_before_it() -> None:
    leader_plan, follower_plan = plan_for("doc-0"), plan_for("doc-0", "Alice left.")
    leader = operation_of(leader_plan).model_copy(update={"dlq_id": "dlq-02"})
    replayer, store, producer = setup(0, operations=[leader])
    store.entries = {
        "dlq-01": replace(entry_for(follower_plan, 1), parked_behind=leader.operation_id),
        "dlq-02": entry_for(leader_plan, 2),
    }

    report = replayer.replay_all(DlqQuery())  # the follower is older: it comes first

    assert [(i.entry.dlq_id, i.action) for i in report.items] == [
        ("dlq-01", Action.WAITING),
        ("dlq-02", Action.REPLAYED),
    ]
    assert "replay that one" in (report.items[0].reason or "")
    assert producer.sent == ["dlq-02"]
    again = replayer.replay_all(DlqQuery())  # the leader is REPLAYED now: it goes too
    assert [(i.entry.dlq_id, i.action) for i in again.items] == [("dlq-01", Action.REPLAYED)]


def test_an_entry_whose_stored_envelope_is_corrupt_is_refused_and_the_others_go_on() -> None:
    replayer, store, producer = setup(2)
    store.entries["dlq-01"] = replace(store.entries["dlq-01"], envelope=b"\x00rot")

    report = replayer.replay_all(DlqQuery())

    assert [i.action for i in report.items] == [Action.REFUSED, Action.REPLAYED]
    assert "reindex" in (report.items[0].reason or "")
    assert producer.sent == ["dlq-02"]


def test_the_stored_plan_is_sent_when_the_operation_exists() -> None:
    plan = plan_for("doc-0")
    replayer, store, _producer = setup(1, operations=[operation_of(plan)])
    store.plans[plan.operation_id] = encode_plan(plan)

    (item,) = replayer.replay_all(DlqQuery()).items

    assert (item.action, item.source) == (Action.REPLAYED, "stored")


def test_a_dry_run_sends_and_marks_nothing() -> None:
    replayer, store, producer = setup(3)
    before = dict(store.entries)

    report = replayer.replay_all(DlqQuery(), dry_run=True)

    assert [i.action for i in report.items] == [Action.WOULD_REPLAY] * 3
    assert producer.sent == [] and store.outbox == [] and store.entries == before


def test_a_limit_bounds_the_run_and_the_next_run_goes_on() -> None:
    replayer, _store, producer = setup(5)

    first = replayer.replay_all(DlqQuery(limit=2))
    second = replayer.replay_all(DlqQuery())

    assert len(first.items) == 2 and len(second.items) == 3
    assert producer.sent == [f"dlq-0{i}" for i in range(1, 6)]
    assert replayer.count(DlqQuery()) == 0


def test_a_service_failure_ends_the_run() -> None:
    replayer, store, producer = setup(3)
    producer.fail = KafkaUnavailable("broker down")

    report = replayer.replay_all(DlqQuery())

    assert [i.action for i in report.items] == [Action.FAILED]
    assert report.stopped is not None and report.stopped.code == "UNAVAILABLE"
    assert {e.status for e in store.entries.values()} == {DlqStatus.PENDING_REVIEW}


def test_a_stop_ends_the_run_after_the_entry_in_hand() -> None:
    replayer, store, producer = setup(4)
    stop = threading.Event()
    producer.after_send = lambda dlq_id: stop.set() if dlq_id == "dlq-02" else None

    report = replayer.replay_all(DlqQuery(), stop=stop)

    assert producer.sent == ["dlq-01", "dlq-02"]
    assert report.interrupted
    assert [e.status for e in store.entries.values()].count(DlqStatus.REPLAYED) == 2


# -- the rate ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []
        self.stop_after: int | None = None

    def wait(self, seconds: float) -> bool:
        self.waits.append(round(seconds, 6))
        self.now += seconds
        return self.stop_after is not None and len(self.waits) >= self.stop_after


def test_a_rate_spaces_the_turns_and_no_rate_never_waits() -> None:
    clock = Clock()
    throttle = Throttle(4, wait=clock.wait, monotonic=lambda: clock.now)
    assert all(throttle.turn() for _ in range(5))
    assert clock.waits == [0.25] * 4
    clock.now += 10  # a slow turn: the next one need not wait
    assert throttle.turn()
    assert clock.waits == [0.25] * 4
    free = Throttle(None, wait=clock.wait, monotonic=lambda: clock.now)
    assert all(free.turn() for _ in range(3))
    assert clock.waits == [0.25] * 4


def test_a_stop_while_waiting_for_a_turn_ends_it() -> None:
    clock = Clock()
    clock.stop_after = 1
    throttle = Throttle(2, wait=clock.wait, monotonic=lambda: clock.now)
    assert throttle.turn()
    assert not throttle.turn()
