"""Reading the ``llm`` extractor's answers: the model's JSON in, candidates with evidence out.

The model gives quotes; offsets are ours: each quote is located in the segment it names, so
``document[start:end] == quote`` holds for every evidence. What cannot be read becomes an
ExtractionIssue naming the chunk, never an exception. Issue messages describe the output (its
size, the JSON error position, the path of a schema violation), never quote it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    EntityCandidate,
    EntityRef,
    Extraction,
    ExtractionIssue,
    RelationCandidate,
)
from graph_ingest.domain.identifiers import is_identifier
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.planning.llm_prompt import Segment

MALFORMED_OUTPUT = "MALFORMED_OUTPUT"
QUOTE_NOT_IN_CHUNK = "QUOTE_NOT_IN_CHUNK"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _WireEndpoint(_Wire):
    type: str
    name: str


class _WireCandidate(_Wire):
    segment: str
    type: str
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    confidence: float = 1.0
    quotes: list[str]


class _WireEntity(_WireCandidate):
    name: str
    aliases: list[str] = Field(default_factory=list)


class _WireRelation(_WireCandidate):
    source: _WireEndpoint
    target: _WireEndpoint


class _WireAnswer(_Wire):
    # Items are read one by one: one bad item costs that item, not the answer.
    entities: list[Any] = Field(default_factory=list)
    relations: list[Any] = Field(default_factory=list)


_W = TypeVar("_W", _WireEntity, _WireRelation)
_C = TypeVar("_C", EntityCandidate, RelationCandidate)
Evidence = tuple[CandidateEvidence, ...]


def group_issues(segments: Sequence[Segment], code: str, message: str) -> list[ExtractionIssue]:
    """One issue per chunk of a request: for what concerns the whole answer."""
    chunk_ids = dict.fromkeys(s.chunk_id for s in segments)
    return [ExtractionIssue(code=code, message=message, chunk_id=c) for c in chunk_ids]


def read_answer(
    content: str, segments: Sequence[Segment], *, truncated: bool = False
) -> Extraction:
    """Candidates from the model's answer ``content`` to a request for ``segments``.
    ``truncated``: the model stopped at its token limit (said in the issue if the JSON is cut)."""
    size = f"model output ({len(content)} characters)"
    try:
        answer = _WireAnswer.model_validate(json.loads(content))
    except json.JSONDecodeError as error:
        cut = "; the model stopped at its max_tokens limit" if truncated else ""
        problem = f"{size} is not JSON: {error.msg} at character {error.pos}{cut}"
        return Extraction(issues=tuple(group_issues(segments, MALFORMED_OUTPUT, problem)))
    except ValidationError as error:
        problem = f"{size} does not match the schema: {_first_problem(error)}"
        return Extraction(issues=tuple(group_issues(segments, MALFORMED_OUTPUT, problem)))
    reader = _Reader(segments)
    entities = reader.candidates("entities", answer.entities, _WireEntity, _entity)
    relations = reader.candidates("relations", answer.relations, _WireRelation, _relation)
    return Extraction(entities=entities, relations=relations, issues=tuple(reader.issues))


def _entity(wire: _WireEntity, evidence: Evidence) -> EntityCandidate:
    return EntityCandidate(
        entity_type=wire.type,
        name=wire.name,
        aliases=tuple(wire.aliases),
        properties=_stated(wire.properties),
        confidence=wire.confidence,
        evidence=evidence,
    )


def _relation(wire: _WireRelation, evidence: Evidence) -> RelationCandidate:
    return RelationCandidate(
        relation_type=wire.type,
        source=EntityRef(entity_type=wire.source.type, name=wire.source.name),
        target=EntityRef(entity_type=wire.target.type, name=wire.target.name),
        properties=_stated(wire.properties),
        confidence=wire.confidence,
        evidence=evidence,
    )


class _Reader:
    def __init__(self, segments: Sequence[Segment]) -> None:
        self._segments = segments
        self._by_ref = {s.ref: s for s in segments}
        self.issues: list[ExtractionIssue] = []

    def candidates(
        self,
        label: str,
        items: list[Any],
        wire_type: type[_W],
        build: Callable[[_W, Evidence], _C],
    ) -> tuple[_C, ...]:
        found = (
            self._candidate(f"{label}[{i}]", item, wire_type, build) for i, item in enumerate(items)
        )
        return tuple(c for c in found if c is not None)

    def _candidate(
        self, where: str, item: Any, wire_type: type[_W], build: Callable[[_W, Evidence], _C]
    ) -> _C | None:
        try:
            wire = wire_type.model_validate(item)
        except ValidationError as error:
            ref = item.get("segment") if isinstance(item, dict) else None
            self._issue(
                ref, MALFORMED_OUTPUT, f"{where} does not match the schema: {_first_problem(error)}"
            )
            return None
        segment = self._by_ref.get(wire.segment)
        if segment is None:
            self._issue(None, MALFORMED_OUTPUT, f"{where} names no segment of the request")
            return None
        quotes = list(dict.fromkeys(wire.quotes))
        evidence = tuple(e for e in (_locate(q, segment) for q in quotes) if e is not None)
        if not evidence:
            self._issue(
                wire.segment,
                QUOTE_NOT_IN_CHUNK,
                f"{where}: none of its {len(quotes)} quotes is in the chunk; dropped",
            )
            return None
        if len(evidence) < len(quotes):
            self._issue(
                wire.segment,
                QUOTE_NOT_IN_CHUNK,
                f"{where}: {len(quotes) - len(evidence)} of its {len(quotes)} quotes are not in the chunk; kept with the others",
            )
        try:
            return build(wire, evidence)
        except ValidationError as error:
            self._issue(
                wire.segment,
                MALFORMED_OUTPUT,
                f"{where} is not a valid candidate: {_first_problem(error)}",
            )
            return None

    def _issue(self, ref: object, code: str, message: str) -> None:
        """An issue on the chunk of segment ``ref``, or on every chunk of the request when the
        segment is unknown."""
        segment = self._by_ref.get(ref) if isinstance(ref, str) else None
        self.issues.extend(group_issues([segment] if segment else self._segments, code, message))


def _locate(quote: str, segment: Segment) -> CandidateEvidence | None:
    """The quote's first occurrence in the segment, in document offsets (exact match only)."""
    at = segment.text.find(quote) if quote else -1
    if at < 0:
        return None
    start = segment.start + at
    return CandidateEvidence(
        chunk_id=segment.chunk_id, quote=quote, start=start, end=start + len(quote)
    )


def _stated(properties: dict[str, PropertyValue]) -> dict[str, PropertyValue]:
    """Properties without the nulls the schema has the model write for what is not stated."""
    return {name: value for name, value in properties.items() if value is not None}


def _first_problem(error: ValidationError) -> str:
    """Where and what, never the offending value: it is model output."""
    problems = error.errors(include_input=False, include_url=False, include_context=False)
    first = problems[0]
    where = ".".join(_path_part(p) for p in first["loc"]) or "<root>"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _path_part(part: str | int) -> str:
    """A field name or index; a key the model made up is shown only if it is an identifier."""
    return str(part) if isinstance(part, int) or is_identifier(part) else "<key>"
