"""The one rendering of a failure: every record of one becomes the same view, shown the same way
by `status` and `dlq show`."""

from __future__ import annotations

from datetime import timedelta

from graph_ingest.cli.operations import _describe_failures
from graph_ingest.dlq.views import show_lines
from graph_ingest.domain.failure_view import AttemptView, FailureView
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.codec import decode_dlq_envelope
from graph_ingest.store.failures import FailureAttempt
from tests.unit.dlq_entries import entry_for
from tests.unit.dlq_envelopes import AT, TRACE_ID, attempt, failure
from tests.unit.plans import plan_for


def test_a_failure_is_summed_up_as_code_class_and_message() -> None:
    info = ErrorInfo(code=StatusCode.ABORTED, error_class="SerializationFailure", message="lost")
    assert FailureView.of_error(info).headline == "ABORTED SerializationFailure: lost"
    assert FailureView.of_error(failure("boom", StatusCode.INTERNAL)) == FailureView(
        StatusCode.INTERNAL, "SerializationFailure", "boom"
    )


def test_a_routed_failure_and_a_dlq_attempt_give_the_same_view_of_one_detail() -> None:
    detail = failure("boom")
    routed = AttemptView.of_routed(detail, attempt=2, tier=1, at=AT, routed_to="dlq")
    record = AttemptView.of_record(attempt(2, tier=1, message="boom"))

    assert routed.failure == record.failure
    assert (routed.attempt, routed.tier, routed.trace_id, routed.worker_id) == (
        record.attempt,
        record.tier,
        TRACE_ID,
        "applier-7",
    )
    assert (routed.routed_to, routed.error_id) == ("dlq", detail.error_id)
    assert (record.routed_to, record.error_id) == (None, None)


def test_the_tier_is_named_or_the_main_topic_is_named_by_the_caller() -> None:
    main = AttemptView.of_record(attempt(1))
    tiered = AttemptView.of_record(attempt(3, tier=2))
    assert (main.where(), main.where("main topic"), tiered.where()) == (
        "main",
        "main topic",
        "tier 2",
    )


def test_status_and_dlq_show_print_the_same_headline_of_a_failure() -> None:
    detail = failure("commit conflict")
    headline = FailureView.of_error(detail).headline
    history = _describe_failures([FailureAttempt(None, "op", 1, None, "tier", AT, detail)])
    entry = entry_for(plan_for("doc-1"))
    shown = show_lines(entry, decode_dlq_envelope(entry.envelope), None, AT + timedelta(seconds=5))

    assert f"  {headline}  (error {detail.error_id}" in history[1]
    assert f" tier 2  {headline} (worker applier-7" in shown[-1]
    assert f"error         {headline}" in shown
