"""Builders of ingest requests for tests."""

from datetime import UTC, datetime
from typing import Any

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    EntityCandidate,
    EntityRef,
    Extraction,
    ExtractionIssue,
    RelationCandidate,
)
from graph_ingest.domain.request import IngestOptions, IngestRequest, StaleRelationPolicy

TEXT = "Alice works at Acme."


def evidence(quote: str, start: int) -> CandidateEvidence:
    return CandidateEvidence(chunk_id="c0", quote=quote, start=start, end=start + len(quote))


def candidates() -> Extraction:
    """Alice WORKS_AT Acme, with evidence, properties of every type and a recorded issue."""
    return Extraction(
        entities=(
            EntityCandidate(
                entity_type="Person",
                name="Alice",
                aliases=("Ali",),
                properties={"age": 41, "score": 0.5, "active": True, "tags": ["a", "b"], "x": None},
                confidence=0.9,
                evidence=(evidence("Alice", 0),),
            ),
            EntityCandidate(entity_type="Company", name="Acme", evidence=(evidence("Acme", 15),)),
        ),
        relations=(
            RelationCandidate(
                relation_type="WORKS_AT",
                source=EntityRef(entity_type="Person", name="Alice"),
                target=EntityRef(entity_type="Company", name="Acme"),
                properties={"since": 2020},
                evidence=(evidence("Alice works at Acme", 0),),
            ),
        ),
        issues=(ExtractionIssue(code="LOW_CONFIDENCE", message="Ali?", chunk_id="c0"),),
    )


def request(document_id: str = "doc-1", **fields: Any) -> IngestRequest:
    values: dict[str, Any] = {
        "space": "unit",
        "document_id": document_id,
        "document_version": "v1",
        "schema_version": "s1",
        "content": TEXT,
        **fields,
    }
    return IngestRequest(**values)


def rich_request() -> IngestRequest:
    """Every field set."""
    return request(
        document_version="2026-12-01T09:00",
        source_updated_at=datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC),
        operation_id="op-given",
        batch_id="batch-7",
        options=IngestOptions(
            stale_relation_policy=StaleRelationPolicy.KEEP,
            re_extract_unchanged=True,
            fail_on_extraction_error=True,
            allow_partial_reconciliation=False,
        ),
        candidates=candidates(),
    )
