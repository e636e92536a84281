"""What extractors produce: chunks of a document, and entity/relation candidates with evidence.

Candidates are *claims*: validation (against the graph schema and quality rules) and resolution
(against the entity registry) decide what of them becomes a plan.
"""

from __future__ import annotations

from pydantic import Field

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import NonEmptyText, Offset, StoredId, StoredText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.mutation import PropertyValue


class Chunk(FrozenModel):
    """A span of the document. ``chunk_id`` is stable: the same text at the same place in the same
    document always gets the same id (it is derived from document id, position and text hash)."""

    chunk_id: StoredId
    start: Offset
    end: Offset
    text: StoredText


class CandidateEvidence(FrozenModel):
    """Where a candidate was read: the chunk, the quoted text, and offsets in the whole document."""

    chunk_id: StoredId
    quote: NonEmptyText
    start: Offset
    end: Offset


class EntityRef(FrozenModel):
    """An endpoint of a relation candidate, named the way the document names it."""

    entity_type: Identifier
    name: NonEmptyText


class EntityCandidate(FrozenModel):
    entity_type: Identifier
    name: NonEmptyText
    aliases: tuple[NonEmptyText, ...] = ()
    properties: dict[Identifier, PropertyValue] = Field(default_factory=dict)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    evidence: tuple[CandidateEvidence, ...] = ()


class RelationCandidate(FrozenModel):
    relation_type: Identifier
    source: EntityRef
    target: EntityRef
    properties: dict[Identifier, PropertyValue] = Field(default_factory=dict)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    evidence: tuple[CandidateEvidence, ...] = ()


class ExtractionIssue(FrozenModel):
    """Something the extractor or the validator noticed and recorded instead of failing."""

    code: Identifier  # e.g. MALFORMED_OUTPUT, LOW_CONFIDENCE, QUOTE_NOT_IN_CHUNK
    message: StoredText
    chunk_id: StoredId | None = None


class Extraction(FrozenModel):
    entities: tuple[EntityCandidate, ...] = ()
    relations: tuple[RelationCandidate, ...] = ()
    issues: tuple[ExtractionIssue, ...] = ()
