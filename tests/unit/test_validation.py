"""Validation of candidates against the graph schema and quality rules, and the drop/fail policy."""

from __future__ import annotations

from typing import Any

import pytest

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    EntityCandidate,
    EntityRef,
    Extraction,
    ExtractionIssue,
    RelationCandidate,
)
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.graph_schema import parse_graph_schema
from graph_ingest.planning.validation import MAX_NAME_CHARS, validate_extraction

pytestmark = pytest.mark.timeout(30)

SCHEMA = parse_graph_schema(
    {
        "version": "1",
        "node_types": {
            "Person": {
                "properties": {
                    "role": {"type": "string", "enum": ["engineer", "manager"]},
                    "level": {"type": "integer"},
                    "score": {"type": "float"},
                    "active": {"type": "boolean"},
                }
            },
            "System": {"properties": {"tier": {"type": "string", "required": True}}},
        },
        "relation_types": {
            "OWNS": {
                "sources": ["Person"],
                "targets": ["System"],
                "properties": {"since": {"type": "integer"}},
            }
        },
    }
)
TEXT = "Alice owns the Ledger. She is great."
CHUNKS = chunk_document("doc", TEXT, max_chars=400)
CHUNK = CHUNKS[0].chunk_id


def at(quote: str, chunk_id: str = CHUNK, shift: int = 0) -> CandidateEvidence:
    start = TEXT.index(quote) + shift
    return CandidateEvidence(chunk_id=chunk_id, quote=quote, start=start, end=start + len(quote))


def person(**changes: Any) -> EntityCandidate:
    fields: dict[str, Any] = {
        "entity_type": "Person",
        "name": "Alice",
        "properties": {"role": "engineer", "level": 3, "score": 2, "active": True},
        "evidence": (at("Alice"),),
    }
    return EntityCandidate(**{**fields, **changes})


def ledger(**changes: Any) -> EntityCandidate:
    fields: dict[str, Any] = {
        "entity_type": "System",
        "name": "Ledger",
        "aliases": ("the Ledger",),
        "properties": {"tier": "critical"},
        "evidence": (at("Ledger"),),
    }
    return EntityCandidate(**{**fields, **changes})


def owns(**changes: Any) -> RelationCandidate:
    fields: dict[str, Any] = {
        "relation_type": "OWNS",
        "source": EntityRef(entity_type="Person", name="alice"),
        "target": EntityRef(entity_type="System", name="THE  ledger"),  # an alias, normalized
        "properties": {"since": 2020},
        "evidence": (at("Alice owns the Ledger"),),
        "confidence": 0.9,
    }
    return RelationCandidate(**{**fields, **changes})


def validate(extraction: Extraction, fail: bool = False) -> Extraction:
    return validate_extraction(extraction, CHUNKS, SCHEMA, min_confidence=0.5, fail_on_error=fail)


def test_valid_candidates_pass_unchanged() -> None:
    extraction = Extraction(entities=(person(), ledger()), relations=(owns(),))

    assert validate(extraction) == extraction
    assert validate(extraction, fail=True) == extraction


@pytest.mark.parametrize(
    ("candidate", "code"),
    [
        (person(entity_type="Robot"), "UNKNOWN_NODE_TYPE"),
        (person(properties={"age": 3}), "UNKNOWN_PROPERTY"),
        (person(properties={"level": "3"}), "PROPERTY_TYPE"),
        (person(properties={"level": True}), "PROPERTY_TYPE"),  # a bool is no integer
        (person(properties={"active": 1}), "PROPERTY_TYPE"),
        (person(properties={"role": ["engineer"]}), "PROPERTY_TYPE"),
        (person(properties={"role": "intern"}), "PROPERTY_NOT_IN_ENUM"),
        (ledger(properties={}), "MISSING_PROPERTY"),
        (ledger(properties={"tier": None}), "MISSING_PROPERTY"),
        (person(confidence=0.49), "LOW_CONFIDENCE"),
        (person(evidence=()), "NO_EVIDENCE"),
        (person(evidence=(at("Alice", chunk_id="chk_other"),)), "UNKNOWN_CHUNK"),
        (person(evidence=(at("Alice", shift=1),)), "QUOTE_NOT_IN_CHUNK"),
        (
            person(evidence=(CandidateEvidence(chunk_id=CHUNK, quote="A", start=0, end=99),)),
            "QUOTE_NOT_IN_CHUNK",
        ),
        (person(name="She", evidence=(at("She"),)), "PRONOUN_NAME"),
        (person(name="   "), "EMPTY_NAME"),
        (person(aliases=("x" * (MAX_NAME_CHARS + 1),)), "NAME_TOO_LONG"),
    ],
)
def test_an_invalid_entity_is_dropped_with_an_issue(candidate: EntityCandidate, code: str) -> None:
    result = validate(Extraction(entities=(candidate, ledger())))

    assert result.entities == (ledger(),)
    assert [i.code for i in result.issues] == [code]
    assert result.issues[0].message.startswith(f"entity {candidate.entity_type} ")


@pytest.mark.parametrize(
    ("relation", "code"),
    [
        (owns(relation_type="HATES"), "UNKNOWN_RELATION_TYPE"),
        (owns(source=EntityRef(entity_type="System", name="Ledger")), "ENDPOINT_TYPE_NOT_ALLOWED"),
        (owns(target=EntityRef(entity_type="System", name="Billing")), "UNKNOWN_ENDPOINT"),
        (owns(source=EntityRef(entity_type="Person", name="she")), "UNKNOWN_ENDPOINT"),
        (owns(properties={"since": 2020.5}), "PROPERTY_TYPE"),
        (owns(confidence=0.1), "LOW_CONFIDENCE"),
        (owns(evidence=(at("owns", shift=2),)), "QUOTE_NOT_IN_CHUNK"),
    ],
)
def test_an_invalid_relation_is_dropped_with_an_issue(
    relation: RelationCandidate, code: str
) -> None:
    result = validate(Extraction(entities=(person(), ledger()), relations=(relation,)))

    assert result.relations == ()
    assert result.entities == (person(), ledger())
    assert [i.code for i in result.issues] == [code]
    assert result.issues[0].chunk_id == relation.evidence[0].chunk_id


def test_a_relation_to_a_dropped_entity_is_dropped_too() -> None:
    result = validate(Extraction(entities=(person(confidence=0.1), ledger()), relations=(owns(),)))

    assert (result.entities, result.relations) == ((ledger(),), ())
    assert [i.code for i in result.issues] == ["LOW_CONFIDENCE", "UNKNOWN_ENDPOINT"]


def test_under_the_fail_policy_every_problem_is_named_extractor_issues_included() -> None:
    extraction = Extraction(
        entities=(person(properties={"role": "intern"}, confidence=0.2), ledger()),
        relations=(owns(),),
        issues=(ExtractionIssue(code="MALFORMED_OUTPUT", message="chunk 3 was not JSON"),),
    )

    with pytest.raises(PlanningError) as raised:
        validate(extraction, fail=True)

    message = str(raised.value)
    assert raised.value.code is StatusCode.INVALID_ARGUMENT
    assert "4 problem(s)" in message
    for code in ("MALFORMED_OUTPUT", "PROPERTY_NOT_IN_ENUM", "LOW_CONFIDENCE", "UNKNOWN_ENDPOINT"):
        assert code in message


def test_extractor_issues_are_kept_under_the_drop_policy() -> None:
    issue = ExtractionIssue(code="MALFORMED_OUTPUT", message="chunk 3 was not JSON")

    result = validate(Extraction(entities=(person(),), issues=(issue,)))

    assert result.issues == (issue,)
    assert result.entities == (person(),)
