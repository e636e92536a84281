"""The planner worker with the real planner (``build_planner``: rules extractor, bundled graph
schema, PostgreSQL view) and the real applier: documents in, the graph they state out."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.domain.candidates import CandidateEvidence, EntityCandidate, Extraction
from graph_ingest.domain.request import IngestRequest, RequestKind
from graph_ingest.domain.stages import Stage
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.producers.follow import Followed, follow
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.schemas.codec import decode_operation
from graph_ingest.wiring import build_planner
from tests.integration.pipeline import Pipeline
from tests.unit.planning_fakes import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BOB_AND_LEDGER = "Bob is a member of the Payments Team. The Payments Team owns the Ledger Service."
V2 = BOB_AND_LEDGER + " The Ledger Service depends on the Billing API."
V3 = "Bob is a member of the Payments Team. The Ledger Service depends on the Billing API."


def start(pipeline: Pipeline) -> None:
    settings = pipeline.real_planner_settings()
    pipeline.start_planner(build_planner(settings), settings)
    pipeline.start_applier()
    pipeline.start_projector()


def submit_and_follow(pipeline: Pipeline, *requests: IngestRequest) -> list[Followed]:
    with IngestProducer(pipeline.settings) as producer:
        submitted = producer.submit_many(requests)
    followed = follow(pipeline.store, [s.submission_id for s in submitted], timeout_s=90)
    assert [f.where for f in followed if not f.completed] == []
    return followed


def stages_ever(pipeline: Pipeline) -> set[Stage]:
    """Every stage any operation went through: the operation events written to the outbox."""
    rows = pipeline.sql(
        "SELECT message_value FROM outbox WHERE topic = %s", pipeline.settings.topics.operations
    )
    return {decode_operation(bytes(value)).stage for (value,) in rows}


def test_three_versions_sent_back_to_back_apply_in_order_without_a_conflict(
    pipeline: Pipeline,
) -> None:
    start(pipeline)

    # When three versions of one document go out in one flush, faster than they can apply
    followed = submit_and_follow(
        pipeline,
        request("doc", BOB_AND_LEDGER, document_version="1"),
        request("doc", V2, document_version="2"),
        request("doc", V3, document_version="3"),
    )

    # Then each was planned on the one before and applied in order: revisions 1, 2, 3
    assert [f.operation.expected_revision for f in followed if f.operation] == [0, 1, 2]
    history = pipeline.store.document_history("kb", "doc")
    assert [(s.revision, s.document_version) for s in history] == [(1, "1"), (2, "2"), (3, "3")]
    assert Stage.CONFLICT not in stages_ever(pipeline)
    assert Stage.COMPLETED in stages_ever(pipeline)
    # and the graph is v3's: the OWNS edge v3 no longer states is gone
    v3 = history[-1]
    nodes, edges = pipeline.graph_elements()
    assert (nodes, edges) == (set(v3.node_ids), set(v3.edge_keys))
    assert {e.type for e in edges} == {"MEMBER_OF", "DEPENDS_ON"}


def test_a_retraction_deletes_what_only_that_document_supported(pipeline: Pipeline) -> None:
    start(pipeline)
    submit_and_follow(
        pipeline,
        request("a", V2),  # Bob, the Payments Team, the Ledger Service, the Billing API
        request("b", "The Payments Team owns the Ledger Service."),
    )
    state_b = pipeline.store.get_document_state("kb", "b")
    assert state_b is not None
    nodes_before, _ = pipeline.graph_elements()

    # When a is retracted through the worker
    submit_and_follow(pipeline, request("a", None, kind=RequestKind.RETRACT, document_version="r"))

    # Then only what b states is left: its two nodes and its edge
    nodes, edges = pipeline.graph_elements()
    assert nodes == set(state_b.node_ids) and len(nodes_before - nodes) == 2
    assert edges == set(state_b.edge_keys) and {e.type for e in edges} == {"OWNS"}
    state_a = pipeline.store.get_document_state("kb", "a")
    assert state_a is not None and (state_a.revision, state_a.node_ids) == (2, ())


def test_the_issues_of_a_documents_extraction_are_shown_by_status(pipeline: Pipeline) -> None:
    start(pipeline)
    # Given precomputed candidates of which seven name a node type the schema does not declare
    text = "Bob is a member of the Payments Team."
    max_chars = pipeline.settings.planner.chunk_max_chars
    chunk = chunk_document("doc", text, max_chars=max_chars)[0]
    bob = EntityCandidate(
        entity_type="Person",
        name="Bob",
        evidence=(CandidateEvidence(chunk_id=chunk.chunk_id, quote="Bob", start=0, end=3),),
    )
    robots = tuple(
        EntityCandidate(entity_type="Robot", name=f"R{i}", evidence=()) for i in range(7)
    )

    # When the document is planned (the invalid candidates dropped) and applied
    [followed] = submit_and_follow(
        pipeline, request("doc", text, candidates=Extraction(entities=(bob, *robots)))
    )
    assert followed.operation is not None
    runner = CliRunner(env=pipeline.env())

    # Then status lists every issue with its code (JSON), by submission or operation
    shown = runner.invoke(cli, ["status", followed.submission_id, "--wait", "60s", "--json"])
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    assert document["issue_count"] == 7
    assert [(i["code"], i["message"]) for i in document["issues"]] == [
        ("UNKNOWN_NODE_TYPE", f"entity Robot 'R{i}': node type 'Robot' is not declared")
        for i in range(7)
    ]
    # and a line per issue (text), the first five, then how many more
    text_status = runner.invoke(cli, ["status", followed.operation.operation_id, "--wait", "60s"])
    assert text_status.exit_code == 0, text_status.output
    lines = text_status.output.splitlines()
    start_at = lines.index("issues      7 recorded while extracting")
    assert lines[start_at + 1 : start_at + 7] == [
        *(
            f"  UNKNOWN_NODE_TYPE entity Robot 'R{i}': node type 'Robot' is not declared"
            for i in range(5)
        ),
        "  +2 more",
    ]
    nodes, _ = pipeline.graph_elements()
    assert len(nodes) == 1  # Bob alone
