"""What names a plan before anything is extracted: base, content hash, fingerprint, operation id."""

from __future__ import annotations

import pytest

from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.plan import Provenance
from graph_ingest.domain.state import DocumentState
from graph_ingest.planning.content import request_content, request_content_hash
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.identity import (
    RETRACTION_FINGERPRINT,
    PlanIdentity,
    ingestion_identity,
    retraction_identity,
)
from graph_ingest.planning.rules import RulesExtractor
from graph_ingest.settings.planner import PlannerSettings
from tests.unit.planning_fakes import example_schema, request

PROVENANCE = Provenance(extractor="rules")


def test_a_new_document_is_planned_on_revision_zero_and_named_by_its_content() -> None:
    given = request("doc-1", "Alice Chen owns Payments API.")
    first = PlanIdentity.of(given, None, content_hash="h1", fingerprint="f", provenance=PROVENANCE)
    other = PlanIdentity.of(given, None, content_hash="h2", fingerprint="f", provenance=PROVENANCE)

    assert (first.expected_revision, first.base_operation_id) == (0, None)
    assert first.operation_id != other.operation_id
    assert first == PlanIdentity.of(
        given, None, content_hash="h1", fingerprint="f", provenance=PROVENANCE
    )


def test_the_requests_own_operation_id_wins() -> None:
    given = request("doc-1", "text", operation_id="op_given")
    named = PlanIdentity.of(given, None, content_hash="h", fingerprint="f", provenance=PROVENANCE)
    assert named.operation_id == "op_given"


def test_an_ingestion_is_fingerprinted_by_extractor_schema_content_and_settings() -> None:
    schema = example_schema()
    extractor = RulesExtractor(schema)
    given = request("doc-1", "Alice Chen owns Payments API.")
    settings = PlannerSettings(extractor="rules")

    named = ingestion_identity(given, None, extractor, schema.version, settings)
    finer = ingestion_identity(
        given,
        None,
        extractor,
        schema.version,
        PlannerSettings(extractor="rules", chunk_max_chars=500),
    )

    assert named.content_hash == content_hash(given.content or "")
    assert named.provenance == Provenance(extractor="rules")
    assert named.extraction_fingerprint != finer.extraction_fingerprint
    assert named.operation_id != finer.operation_id


def test_a_retraction_keeps_the_content_hash_and_extracts_nothing() -> None:
    schema = example_schema()
    given = request("doc-1", "Alice Chen owns Payments API.")
    ingested = ingestion_identity(
        given, None, RulesExtractor(schema), schema.version, PlannerSettings(extractor="rules")
    )
    previous_state = _state_of(ingested)

    retracted = retraction_identity(given, previous_state)

    assert retracted.extraction_fingerprint == RETRACTION_FINGERPRINT
    assert retracted.content_hash == ingested.content_hash
    assert (retracted.expected_revision, retracted.base_operation_id) == (1, ingested.operation_id)


def test_content_must_match_the_hash_it_comes_with() -> None:
    given = request("doc-1", "some text", content_hash=content_hash("other text"))
    with pytest.raises(PlanningError, match="is not the hash of the content"):
        request_content_hash(given)
    by_reference = request("doc-2", None, content_ref="file:///x", content_hash=content_hash("a"))
    assert request_content(by_reference, content_hash("a"), lambda ref: "a") == "a"
    with pytest.raises(PlanningError, match="does not match content_hash"):
        request_content(by_reference, content_hash("a"), lambda ref: "b")


def _state_of(identity: PlanIdentity) -> DocumentState:
    """The state the plan named ``identity`` commits (revision 1)."""
    return DocumentState(
        space="kb",
        document_id="doc-1",
        revision=1,
        operation_id=identity.operation_id,
        content_hash=identity.content_hash,
        document_version="1",
    )
