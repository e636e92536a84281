"""The DLQ, degradation and document read rows as pure values: a planning DLQ entry reads as a
request, attempts count the folded ones, breakers are read from the real monitor's reasons, and
a document's view is one for any order of its snapshots."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest
from confluent_kafka import Message

from graph_ingest.domain.degradation import DegradationLevel
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.projections.degradation_rows import breakers_of, worker_degradation
from graph_ingest.projections.dlq_rows import read_entry
from graph_ingest.projections.document_fold import DocumentView, fold_document
from graph_ingest.projections.document_table import _values, view_from_row
from graph_ingest.projections.events import OperationEvent
from graph_ingest.projections.fold import FoldVerdict
from graph_ingest.projections.read_events import DegradationChange, DlqEvent, ReadDecoder, skipped
from graph_ingest.schemas.codec import encode_degradation_event, encode_dlq_envelope
from graph_ingest.settings.kafka import TopicSettings
from tests.operation_histories import COMPLETED, DEAD_LETTERED_AFTER_RETRY, history, scrambled
from tests.read_view_samples import (
    DLQ_TOPIC,
    REQUESTS_TOPIC,
    TRACE,
    degradation_changes,
    degradation_events,
    dlq_events,
    request_entry,
)

pytestmark = pytest.mark.timeout(60)

RETRY = None  # no retry headers: the projector's topics carry none


def test_a_plan_entry_reads_as_a_plan_with_every_attempt_counted() -> None:
    event = dlq_events()[4]  # op-1 failed again after its replay
    entry = read_entry(event, REQUESTS_TOPIC)
    assert entry is not None
    assert (entry.status, entry.is_request, entry.operation_id) == (
        DlqStatus.PENDING_REVIEW,
        False,
        "op-1",
    )
    assert (entry.space, entry.document_id, entry.submission_id) == ("it", "doc-1", "sub-1")
    assert entry.attempts == 4  # 2 uncounted retries, the first recorded, the replay's
    assert (entry.trace_id, entry.code.value) == (TRACE, "FAILED_PRECONDITION")
    assert (entry.topic, entry.partition, entry.offset) == (DLQ_TOPIC, 0, 4)


def test_a_planning_entry_reads_as_a_request_not_as_a_plan() -> None:
    dlq_id, envelope = request_entry()
    event = DlqEvent(DLQ_TOPIC, 0, 9, dlq_id, envelope, encode_dlq_envelope(envelope))
    entry = read_entry(event, REQUESTS_TOPIC)
    assert entry is not None
    assert entry.is_request
    assert (entry.submission_id, entry.space, entry.document_id) == ("sub-r", "it", "doc-r")
    assert entry.operation_id is None
    assert read_entry(event, "another-requests-topic").is_request is False  # type: ignore[union-attr]


def test_an_event_without_payload_gives_no_row() -> None:
    assert read_entry(skipped(dlq_events()[0]), REQUESTS_TOPIC) is None  # type: ignore[arg-type]
    assert worker_degradation(skipped(degradation_changes("w")[0])) is None  # type: ignore[arg-type]


def test_breakers_are_read_from_the_monitors_reasons() -> None:
    opened, both, half = (worker_degradation(c) for c in degradation_changes("w"))
    assert opened and both and half
    assert (opened.level, opened.breakers) == (DegradationLevel.L1, {"neo4j": "open"})
    assert (both.level, both.breakers) == (
        DegradationLevel.L2,
        {"neo4j": "open", "postgres": "open"},
    )
    assert (half.level, half.breakers) == (DegradationLevel.L1, {"neo4j": "half-open"})
    assert half.since == half.last_event_at  # the event's time; the sample stamps both alike
    assert breakers_of("every breaker closed for 60 s") == {}
    assert breakers_of("worker unhealthy (circuit breaker open: kafka)") == {"kafka": "open"}


def document_histories() -> list[Operation]:
    """doc-1: op-a completed (revision 1, version v1), op-b completed on it (2, v2), op-c
    (v3) dead-lettered."""
    return [
        op.model_copy(update={"expected_revision": revision, "document_version": version})
        for operation_id, path, revision, version in (
            ("op-a", COMPLETED, 0, "v1"),
            ("op-b", COMPLETED, 1, "v2"),
            ("op-c", DEAD_LETTERED_AFTER_RETRY, 2, "v3"),
        )
        for op in history(operation_id, path, document="doc-1")
    ]


def fold_all(events: list[Operation]) -> DocumentView | None:
    view: DocumentView | None = None
    for event in events:
        _, view = fold_document(view, event)
    return view


def test_a_document_is_what_its_last_completed_operation_made_it() -> None:
    view = fold_all(document_histories())
    assert view is not None
    assert (view.revision, view.document_version, view.operation_id) == (2, "v2", "op-b")
    assert [(o.operation_id, o.stage) for o in view.operations] == [
        ("op-a", Stage.COMPLETED),
        ("op-b", Stage.COMPLETED),
        ("op-c", Stage.DEAD_LETTERED),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_duplicated_and_shuffled_snapshots_give_one_view(seed: int) -> None:
    events = document_histories()
    assert fold_all(scrambled(events, seed)) == fold_all(events)


def test_an_older_snapshot_is_a_duplicate_and_a_no_op_never_names_the_state() -> None:
    events = document_histories()
    view = fold_all(events)
    assert view is not None
    verdict, same = fold_document(view, events[0])
    assert (verdict, same) == (FoldVerdict.DUPLICATE, view)
    # A NO_OP completed on revision 2 leaves the document at 2, made by op-b
    op_b = next(o for o in view.operations if o.operation_id == "op-b")
    no_op = replace(op_b, operation_id="op-d", expected_revision=2, plan_kind=PlanKind.NO_OP)
    again = DocumentView.of(view.space, view.document_id, (no_op, *view.operations))
    assert (again.revision, again.operation_id) == (2, "op-b")


def test_a_completed_no_op_event_leaves_the_revision_where_it_was() -> None:
    no_op = [
        op.model_copy(update={"expected_revision": 2, "plan_kind": PlanKind.NO_OP})
        for op in history("op-d", COMPLETED, document="doc-1")
    ]
    view = fold_all([*document_histories(), *no_op])
    assert view is not None
    assert (view.revision, view.document_version, view.operation_id) == (2, "v2", "op-b")
    assert [o.plan_kind for o in view.operations if o.operation_id == "op-d"] == [PlanKind.NO_OP]


def test_the_version_is_the_one_the_operation_that_made_the_revision_made() -> None:
    # Given doc-1 at revision 2 (op-b, v2), and a later version completed on it
    later = [
        op.model_copy(update={"expected_revision": 2, "document_version": "v4"})
        for op in history("op-e", COMPLETED, document="doc-1")
    ]
    view = fold_all([*document_histories(), *later[:-1]])
    assert view is not None
    # Then the version moves only when that operation completes
    assert (view.revision, view.document_version) == (2, "v2")
    _, view = fold_document(view, later[-1])
    assert (view.revision, view.document_version) == (3, "v4")
    # and a document no operation of which completed has no version
    dead = fold_all(history("op-c", DEAD_LETTERED_AFTER_RETRY, document="doc-2"))
    assert dead is not None and (dead.revision, dead.document_version) == (0, None)


def test_a_document_made_by_an_operation_v1_event_has_no_version() -> None:
    view = fold_all(history("op-a", COMPLETED, document="doc-1", v2=False))
    assert view is not None
    assert (view.revision, view.operation_id, view.document_version) == (1, "op-a", None)


def test_the_version_is_read_back_from_the_documents_row() -> None:
    view = fold_all(document_histories())
    assert view is not None
    row = {**_values(view), "operations": orjson.loads(_values(view)["operations"])}
    assert view_from_row(row) == view
    # a row folded before operations carried the version reads as not recorded
    for operation in row["operations"]:
        del operation["document_version"]
    assert view_from_row(row).document_version is None


def message(topic: str, value: bytes | None, key: bytes | None = b"k") -> Message:
    return Message(topic=topic, partition=1, offset=5, key=key, value=value, headers=None)


def test_the_decoder_reads_each_topic_and_skips_what_is_none() -> None:
    topics = TopicSettings()
    decode = ReadDecoder(topics)
    dlq_id, envelope = request_entry()
    encoded = encode_dlq_envelope(envelope)
    read = decode(message(topics.dlq, encoded, dlq_id.encode()), (), RETRY)
    assert isinstance(read, DlqEvent)
    assert (read.dlq_id, read.envelope, read.offset) == (dlq_id, envelope, 5)
    # garbage, a tombstone, an envelope without its key: no envelope, the position kept
    for value, key in ((b"\x00 garbage", b"k"), (None, b"k"), (encoded, None)):
        none = decode(message(topics.dlq, value, key), (), RETRY)
        assert isinstance(none, DlqEvent) and none.envelope is None and none.offset == 5
    [event] = degradation_events("w")[:1]
    change = decode(message(topics.degradation, encode_degradation_event(event)), (), RETRY)
    assert isinstance(change, DegradationChange) and change.event == event
    bad = decode(message(topics.degradation, b"\x00"), (), RETRY)
    assert isinstance(bad, DegradationChange) and bad.event is None
    operation = decode(message(topics.operations, b"\x00"), (), RETRY)
    assert isinstance(operation, OperationEvent) and operation.operation is None
