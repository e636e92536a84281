"""`dlq replay` and `dlq replay-all`: re-publish frozen plans of DLQ entries, one at a time.

Each replay is published and its acknowledgement awaited, then the entry is marked REPLAYED (its
row and the DLQ topic, one transaction): a run that is interrupted, or dies, leaves every entry
it replayed marked, and ``replay-all`` replays PENDING_REVIEW entries only, so running it again
goes on where it stopped. (A process killed between an acknowledgement and its mark replays that
one plan again next time: the applier treats a completed plan as a duplicate.) The mark is made
only if the entry is still the envelope that was replayed: a replay that has already failed again
meanwhile is back at PENDING_REVIEW with its history extended, and stays so. One run replays an
entry at most once, however often it comes back, and reads each entry again when its turn comes:
one replayed, released or resolved since it was listed is left alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from graph_ingest.dlq.errors import DlqEntryNotFound, DlqRefused, DlqWaiting
from graph_ingest.dlq.replay import (
    PlanSource,
    Replay,
    RequestReplay,
    choose_plan,
    leader_refusal,
    plan_refusal,
    request_replay,
    status_refusal,
    waits_for,
)
from graph_ingest.dlq.status import set_status
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.kafka.producer import BatchProducer
from graph_ingest.producers.recovery import is_service_failure
from graph_ingest.resilience.classify import error_info
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.settings import Settings
from graph_ingest.store.base import OperationStore
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery

log = logging.getLogger(__name__)

PAGE_SIZE = 100


class Action(StrEnum):
    REPLAYED = "replayed"
    WOULD_REPLAY = "would-replay"  # --dry-run
    REFUSED = "refused"  # the frozen plan cannot be replayed (stale, no plan, ...): the reason
    WAITING = "waiting"  # behind a version still in the DLQ: released when that one completes
    FAILED = "failed"  # publishing failed; a service failure ends the run


@dataclass(frozen=True, slots=True)
class ReplayItem:
    entry: DlqEntry
    """The entry as it is after this (REPLAYED when marked)."""
    action: Action
    source: PlanSource | None = None
    reason: str | None = None
    """Why it was refused; or, for a replay, a remark (it will park, it was not marked)."""
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class ReplayReport:
    items: tuple[ReplayItem, ...]
    dry_run: bool
    interrupted: bool
    """Stopped by a signal before every selected entry was seen: run it again to go on."""
    stopped: ErrorInfo | None = None
    """The service failure that ended the run early."""

    def count(self, action: Action) -> int:
        return sum(item.action is action for item in self.items)


class Throttle:
    """At most ``rate`` turns per second (None: no limit); waiting ends early when ``wait``
    (a stop event's ``wait``) says to stop."""

    def __init__(
        self,
        rate: float | None,
        *,
        wait: Callable[[float], bool],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = 0.0 if rate is None else 1.0 / rate
        self._monotonic = monotonic
        self._wait = wait
        self._next: float | None = None

    def turn(self) -> bool:
        """Wait for the next turn; False if told to stop meanwhile."""
        now = self._monotonic()
        if self._next is not None and self._next > now and self._wait(self._next - now):
            return False
        self._next = max(now, self._next or now) + self._interval
        return True


class DlqReplayer:
    """Replays DLQ entries through ``producer`` (owned by the caller) to the plans topic."""

    def __init__(
        self,
        store: OperationStore,
        producer: BatchProducer,
        settings: Settings,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._producer = producer
        self._plans_topic = settings.topics.plans
        self._requests_topic = settings.topics.requests
        self._max_message_bytes = settings.topics.max_message_bytes
        self._dlq_topic = settings.topics.dlq
        self._publish_timeout_s = settings.dlq.publish_timeout_s
        self._monotonic = monotonic

    def entry(self, dlq_id: str) -> DlqEntry:
        found = self._store.get_dlq_entry(dlq_id)
        if found is None:
            raise DlqEntryNotFound(f"DLQ entry {dlq_id} not found")
        return found

    def prepare(self, entry: DlqEntry, *, force: bool = False) -> Replay | RequestReplay:
        """The replay of ``entry``, checked; DlqRefused with the reason when there is none. A
        planning entry (its original topic the requests topic) replays its request."""
        refused = status_refusal(entry, force=force)
        if refused:
            raise DlqRefused(refused)
        self._check_leader(entry)
        try:
            envelope = decode_dlq_envelope(entry.envelope)
        except GraphIngestError as exc:
            raise DlqRefused(
                f"entry {entry.dlq_id}: its stored envelope cannot be decoded ({exc}); "
                "`graph-ingest dlq reindex` rebuilds the index from the DLQ topic"
            ) from exc
        if envelope.original_topic == self._requests_topic:
            return request_replay(entry, envelope)
        operation = self._store.get_operation(entry.operation_id) if entry.operation_id else None
        stored = self._store.get_plan_bytes(operation.operation_id) if operation else None
        plan, plan_bytes, source = choose_plan(entry, envelope, operation, stored)
        committed = self._store.get_document_state(plan.space, plan.document_id)
        refused = plan_refusal(plan, operation, committed)
        if refused:
            raise DlqRefused(f"entry {entry.dlq_id}: {refused}")
        return Replay(
            entry=entry,
            plan=plan,
            plan_bytes=plan_bytes,
            source=source,
            trace_id=envelope.attempts[-1].trace_id,
            waits_for=waits_for(plan, committed),
            work_headers={
                **kafka_headers.work_headers([(h.key, h.value) for h in envelope.original_headers]),
                **(self._store.get_work_headers(operation.operation_id) if operation else {}),
            },
        )

    def _check_leader(self, entry: DlqEntry) -> None:
        if entry.parked_behind is None:
            return
        leader = self._store.get_operation(entry.parked_behind)
        leader_entry = (
            self._store.get_dlq_entry(leader.dlq_id) if leader and leader.dlq_id else None
        )
        waiting = leader_refusal(entry, leader, leader_entry)
        if waiting:
            raise DlqWaiting(waiting)

    def replay(self, dlq_id: str, *, force: bool = False, by: str = "dlq replay") -> ReplayItem:
        """Replay one entry now (``by``: which command, noted on the entry). Raises
        DlqEntryNotFound, DlqRefused, or the error of the service that failed."""
        return self._publish(self.prepare(self.entry(dlq_id), force=force), by=by)

    def count(self, query: DlqQuery) -> int:
        """How many entries ``replay_all(query)`` would look at (at most)."""
        pending = replace(query, status=DlqStatus.PENDING_REVIEW, after=None)
        total = self._store.count_dlq_entries(pending)
        return total if query.limit is None else min(total, query.limit)

    def replay_all(
        self,
        query: DlqQuery,
        *,
        dry_run: bool = False,
        rate: float | None = None,
        stop: threading.Event | None = None,
        on_item: Callable[[ReplayItem], None] = lambda item: None,
    ) -> ReplayReport:
        """Replay the PENDING_REVIEW entries ``query`` selects (its status aside), oldest first,
        at most ``rate`` per second. A refused entry is reported and the others go on (one waiting
        behind a version in the DLQ, replayed later in the run, is released when that one
        completes); a service failure ends the run; ``stop`` ends it after the entry in hand."""
        stop = stop or threading.Event()
        throttle = Throttle(rate, monotonic=self._monotonic, wait=stop.wait)
        pending = replace(query, status=DlqStatus.PENDING_REVIEW)
        items: list[ReplayItem] = []
        seen: set[str] = set()
        after = query.after
        stopped: ErrorInfo | None = None
        while stopped is None and not stop.is_set():
            left = None if query.limit is None else query.limit - len(items)
            if left == 0:
                break
            page = self._store.list_dlq_entries(
                replace(
                    pending, limit=PAGE_SIZE if left is None else min(PAGE_SIZE, left), after=after
                )
            )
            if not page:
                break
            after = (page[-1].dead_lettered_at, page[-1].dlq_id)
            for listed in page:
                if listed.dlq_id in seen:
                    continue  # failed again after its replay by this run: not again
                if stop.is_set():
                    break
                seen.add(listed.dlq_id)
                entry = self._store.get_dlq_entry(listed.dlq_id)
                if entry is None or entry.status is not DlqStatus.PENDING_REVIEW:
                    continue  # replayed, released or resolved since it was listed
                item = self._replay_listed(entry, dry_run=dry_run, throttle=throttle)
                if item is None:  # stopped while waiting for its turn
                    break
                items.append(item)
                on_item(item)
                if item.error is not None and is_service_failure(item.error.code):
                    stopped = item.error
                    break
        return ReplayReport(
            items=tuple(items), dry_run=dry_run, interrupted=stop.is_set(), stopped=stopped
        )

    def _replay_listed(
        self, entry: DlqEntry, *, dry_run: bool, throttle: Throttle
    ) -> ReplayItem | None:
        try:
            ready = self.prepare(entry)
        except DlqWaiting as exc:
            return ReplayItem(entry, Action.WAITING, reason=str(exc))
        except DlqRefused as exc:
            return ReplayItem(entry, Action.REFUSED, reason=str(exc))
        if dry_run:
            return ReplayItem(
                entry, Action.WOULD_REPLAY, source=ready.source, reason=_remark(ready)
            )
        if not throttle.turn():
            return None
        try:
            return self._publish(ready, by="dlq replay-all")
        except GraphIngestError as exc:
            info = error_info(exc)
            log.error(
                "dlq replay %s op=%s: %s %s",
                entry.dlq_id,
                entry.operation_id,
                info.code,
                info.message,
            )
            return ReplayItem(entry, Action.FAILED, source=ready.source, error=info)

    def _publish(self, ready: Replay | RequestReplay, *, by: str) -> ReplayItem:
        entry = ready.entry
        if isinstance(ready, RequestReplay):
            message = ready.outgoing
        else:
            message, claim = ready.message(self._plans_topic, max_bytes=self._max_message_bytes)
            if claim is not None:
                with self._store.unit_of_work() as uow:
                    uow.put_plan_claims([claim])
        self._producer.start()  # idempotent
        self._producer.produce_batch([message], timeout_s=self._publish_timeout_s)
        log.info(
            "%s replayed %s op=%s key=%s (%s)",  # source: stored, envelope or request
            message.topic,
            entry.dlq_id,
            message.operation_id,
            message.key.decode("utf-8", "replace") if message.key else None,
            ready.source,
        )
        what = "its request" if isinstance(ready, RequestReplay) else f"{ready.source} plan"
        note = f"replayed to {message.topic} ({what}) by {by}"
        marked = set_status(
            self._store, self._dlq_topic, entry.dlq_id, DlqStatus.REPLAYED, note, seen=entry
        )
        if marked is None:
            remark = (
                "the entry changed meanwhile (failed again already?): its status is left as it is"
            )
            return ReplayItem(entry, Action.REPLAYED, source=ready.source, reason=remark)
        return ReplayItem(marked, Action.REPLAYED, source=ready.source, reason=_remark(ready))


def _remark(ready: Replay | RequestReplay) -> str | None:
    if not isinstance(ready, Replay) or ready.waits_for is None:
        return None
    behind = (
        f" (it followed {ready.entry.parked_behind} to the DLQ)"
        if ready.entry.parked_behind
        else ""
    )
    return (
        f"document {ready.plan.key} has not reached revision {ready.waits_for}: the plan parks "
        f"until it does{behind}"
    )


__all__ = ["Action", "DlqReplayer", "ReplayItem", "ReplayReport", "Throttle"]
