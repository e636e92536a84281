"""Redrive tasks' pure parts: the filter as a query and as JSON, the progress counts, how a run
that ended is recorded, and the audit's reason rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graph_ingest.dlq.audit import Audit, AuditAction, MissingReason
from graph_ingest.dlq.replayer import Action, ReplayItem, ReplayReport
from graph_ingest.dlq.tasks import MAX_REFUSALS_KEPT, RunningTask, filter_json, final_status
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.audit import AuditEntry, AuditQuery, AuditRecord
from graph_ingest.store.dlq_index import DlqEntry, DlqQuery
from graph_ingest.store.redrive_tasks import RedriveTask, TaskProgress, TaskStatus

pytestmark = pytest.mark.timeout(10)

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_a_filter_is_kept_as_json_of_what_is_set_status_and_cursor_aside() -> None:
    selection = DlqQuery(
        status=DlqStatus.RESOLVED,
        code=StatusCode.FAILED_PRECONDITION,
        error_class="GraphConstraintError",
        space="it",
        dead_lettered_from=AT,
        dlq_ids=("dlq-a", "dlq-b"),
        limit=5,
        after=(AT, "dlq-0"),
    )

    assert filter_json(selection) == {
        "code": "FAILED_PRECONDITION",
        "error_class": "GraphConstraintError",
        "space": "it",
        "dead_lettered_from": "2026-12-01T09:30:00+00:00",
        "dlq_ids": ["dlq-a", "dlq-b"],
        "limit": 5,
    }
    assert filter_json(DlqQuery()) == {}


def entry(dlq_id: str) -> DlqEntry:
    return DlqEntry(
        dlq_id=dlq_id,
        status=DlqStatus.PENDING_REVIEW,
        operation_id=None,
        fingerprint=None,
        space="it",
        document_id="doc",
        code=StatusCode.FAILED_PRECONDITION,
        error_class="X",
        message="m",
        parked_behind=None,
        original_topic="plans",
        original_partition=0,
        original_offset=0,
        attempts=1,
        dead_lettered_at=AT,
        envelope=b"",
    )


def running_task() -> RunningTask:
    progress = TaskProgress()
    return RunningTask(
        RedriveTask(
            "task-1",
            "plans.dlq",
            TaskStatus.RUNNING,
            {},
            None,
            "me",
            None,
            3,
            progress,
            None,
            AT,
            AT,
            None,
        )
    )


def test_progress_counts_moves_refusals_and_failures_keeping_the_first_reasons() -> None:
    running = running_task()
    failure = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="E", message="down")
    running.progress.add(ReplayItem(entry("dlq-1"), Action.REPLAYED))
    running.progress.add(ReplayItem(entry("dlq-2"), Action.REFUSED, reason="stale plan"))
    running.progress.add(ReplayItem(entry("dlq-3"), Action.WAITING, reason="behind dlq-9"))
    running.progress.add(ReplayItem(entry("dlq-4"), Action.FAILED, error=failure))
    for i in range(MAX_REFUSALS_KEPT):
        running.progress.add(ReplayItem(entry(f"dlq-r{i}"), Action.REFUSED, reason="no plan"))

    now = running.progress.snapshot()

    assert (now.moved, now.refused, now.failed) == (1, 2 + MAX_REFUSALS_KEPT, 1)
    assert len(now.refusals) == MAX_REFUSALS_KEPT
    assert [(r.dlq_id, r.reason) for r in now.refusals[:3]] == [
        ("dlq-2", "refused: stale plan"),
        ("dlq-3", "waiting: behind dlq-9"),
        ("dlq-4", "failed: down"),
    ]


def report(stopped: ErrorInfo | None = None) -> ReplayReport:
    return ReplayReport(items=(), dry_run=False, interrupted=False, stopped=stopped)


def test_a_run_that_ended_is_completed_cancelled_or_failed() -> None:
    done = running_task()
    done.report = report()
    assert final_status(done) == (TaskStatus.COMPLETED, None)

    cancelled = running_task()
    cancelled.report = report()
    cancelled.cancel_requested.set()
    assert final_status(cancelled) == (TaskStatus.CANCELLED, None)

    outage = running_task()
    outage.report = report(ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="E", message="down"))
    assert final_status(outage) == (TaskStatus.FAILED, "UNAVAILABLE: down")

    crashed = running_task()
    crashed.error = RuntimeError("boom")
    assert final_status(crashed) == (TaskStatus.FAILED, "RuntimeError: boom")


class Appended:
    """An AuditLog that keeps what is appended (the rule under test is Audit's, not the
    database's: the PostgreSQL log is tested in tests/integration/test_redrive_tasks.py)."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def append_audit(self, record: AuditRecord) -> AuditEntry:
        self.records.append(record)
        return AuditEntry(len(self.records), AT, record)

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        return []


def test_a_purge_needs_a_reason_and_a_blank_actor_is_the_local_user() -> None:
    log = Appended()
    audit = Audit(log)

    with pytest.raises(MissingReason):
        audit.record(action=AuditAction.DLQ_PURGE, by="eve", target=["dlq-1"], reason="  ")
    audit.record(action=AuditAction.BREAKER_FORCE_OPEN, by="", target=["neo4j"])

    (record,) = log.records
    assert record.action == "breaker.force-open" and record.target == ("neo4j",)
    assert "@" in record.actor and record.reason is None
