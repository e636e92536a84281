"""A planning DLQ entry (a request that could not be planned) as the DLQ tools show it: the
request (submission, space, document, version, its error), never "plan none: DecodeError"; and a
plan's entry shown as before."""

from __future__ import annotations

from datetime import timedelta

import pytest

from graph_ingest.dlq.entries import entry_of
from graph_ingest.dlq.views import entry_json, entry_table, show_json, show_lines
from graph_ingest.domain.dlq import MessageHeader
from graph_ingest.schemas.codec import decode_dlq_envelope, encode_ingest_request
from graph_ingest.store.dlq_index import DlqEntry
from tests.unit.dlq_entries import entry_for
from tests.unit.dlq_envelopes import AT, envelope
from tests.unit.plans import plan_for
from tests.unit.requests import request

pytestmark = pytest.mark.timeout(30)

REQUESTS = "ingestion.requests"
NOW = AT + timedelta(minutes=5)


def planning_entry(value: bytes | None = None) -> DlqEntry:
    """The planning DLQ entry of a request for kb/doc-9 sent as submission sub-9."""
    asked = request("doc-9", space="kb", document_version="v3")
    return entry_of(
        "dlq-req",
        envelope(
            original_topic=REQUESTS,
            original_partition=0,
            original_offset=7,
            original_key=b"kb/doc-9",
            original_value=encode_ingest_request(asked) if value is None else value,
            original_headers=(MessageHeader(key="submission_id", value=b"sub-9"),),
            operation_id=None,
            fingerprint=None,
        ),
    )


def test_a_planning_entry_is_shown_as_its_request() -> None:
    entry = planning_entry()
    lines = show_lines(
        entry, decode_dlq_envelope(entry.envelope), None, NOW, requests_topic=REQUESTS
    )
    assert (
        "request       submission sub-9: INGEST kb/doc-9 version v3, never planned "
        "(no plan, no operation)"
    ) in lines
    assert "error         ABORTED SerializationFailure: commit conflict" in lines
    assert f"replay        submits the request again to {REQUESTS}: planned afresh" in lines
    assert not any(line.startswith(("plan ", "operation ")) for line in lines), lines
    # and JSON says the same: a request, no plan
    shown = show_json(
        entry, decode_dlq_envelope(entry.envelope), None, NOW, requests_topic=REQUESTS
    )
    assert shown["plan"] is None
    assert shown["request"] == {
        "submission_id": "sub-9",
        "space": "kb",
        "document_id": "doc-9",
        "kind": "INGEST",
        "document_version": "v3",
        "decodes": True,
        "error": None,
    }
    assert (shown["code"], shown["error_class"]) == ("ABORTED", "SerializationFailure")


def test_a_planning_entry_is_listed_as_its_submission() -> None:
    entry, plan_entry = planning_entry(), entry_for(plan_for("doc-1"))
    [_, request_row, plan_row] = entry_table([entry, plan_entry], NOW, requests_topic=REQUESTS)
    assert request_row.split()[-3:] == ["kb/doc-9", "request", "sub-9"]
    assert plan_row.endswith(plan_entry.operation_id or "?")
    assert entry_json(entry, NOW, requests_topic=REQUESTS)["request"]["submission_id"] == "sub-9"
    assert entry_json(plan_entry, NOW, requests_topic=REQUESTS)["request"] is None


def test_a_planning_entry_that_holds_no_request_says_so_and_that_replay_is_refused() -> None:
    entry = planning_entry(value=b"\x00not avro")
    lines = show_lines(
        entry, decode_dlq_envelope(entry.envelope), None, NOW, requests_topic=REQUESTS
    )
    [held] = [line for line in lines if line.startswith("request ")]
    assert held.startswith("request       submission sub-9, kb/doc-9: its bytes are no request (")
    assert "replay        refused: it holds no request to submit again (purge it)" in lines


def test_a_plans_entry_is_shown_as_before() -> None:
    plan = plan_for("doc-1")
    entry = entry_for(plan)
    envelope_of = decode_dlq_envelope(entry.envelope)
    lines = show_lines(entry, envelope_of, None, NOW, requests_topic=REQUESTS)
    assert any(line.startswith(f"operation     {plan.operation_id}") for line in lines)
    assert any(line.startswith(f"plan          {plan.operation_id}") for line in lines)
    shown = show_json(entry, envelope_of, None, NOW, requests_topic=REQUESTS)
    assert shown["plan"]["decodes"] is True and shown["request"] is None
    # and callers that pass no requests topic (the API, until it adopts it) get today's shape
    assert "request" not in show_json(entry, envelope_of, None, NOW)
    assert "request" not in entry_json(entry, NOW)
