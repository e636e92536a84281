"""Check candidates against the graph schema and the quality rules, and apply the policy.

Schema: known node and relation types, a relation's endpoint types among those its type allows,
properties declared, of their type, within their enum, required ones present. Quality: confidence
at least the threshold, evidence present and every quote exactly the chunk's text at its offsets,
names that are not pronouns nor longer than MAX_NAME_CHARS, relation endpoints among the (valid) entity candidates.

Policy (``fail_on_error``): false drops each invalid candidate and records one ExtractionIssue per
problem; true fails the document with a PlanningError naming every problem, the extractor's own
issues included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    Chunk,
    EntityCandidate,
    Extraction,
    ExtractionIssue,
    RelationCandidate,
)
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.state import normalize_name
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.graph_schema import GraphSchema, PropertySpec, PropertyType
from graph_ingest.planning.names import is_pronoun, strong_names

# Names are registry keys (an indexed column, with the space and type): well below its limit.
MAX_NAME_CHARS = 300


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str


_PYTHON_TYPES: dict[PropertyType, tuple[type, ...]] = {
    PropertyType.STRING: (str,),
    PropertyType.INTEGER: (int,),
    PropertyType.FLOAT: (int, float),
    PropertyType.BOOLEAN: (bool,),
}


def property_problems(
    specs: Mapping[str, PropertySpec], properties: Mapping[str, PropertyValue]
) -> list[Problem]:
    """What is wrong with ``properties`` under ``specs`` (empty when nothing is)."""
    problems = [
        Problem("MISSING_PROPERTY", f"required property {name!r} is missing")
        for name, spec in specs.items()
        if spec.required and properties.get(name) is None
    ]
    for name, value in properties.items():
        spec = specs.get(name)
        if spec is None:
            problems.append(Problem("UNKNOWN_PROPERTY", f"property {name!r} is not declared"))
        elif value is not None and not _has_type(value, spec.type):
            problems.append(
                Problem("PROPERTY_TYPE", f"property {name!r}: {value!r} is not a {spec.type}")
            )
        elif value is not None and spec.enum is not None and value not in spec.enum:
            problems.append(
                Problem(
                    "PROPERTY_NOT_IN_ENUM",
                    f"property {name!r}: {value!r} is not one of {list(spec.enum)}",
                )
            )
    return problems


def _has_type(value: PropertyValue, expected: PropertyType) -> bool:
    # bool is an int in Python; an integer or float property does not take one.
    if isinstance(value, bool):
        return expected is PropertyType.BOOLEAN
    return isinstance(value, _PYTHON_TYPES[expected])


def validate_extraction(
    extraction: Extraction,
    chunks: Sequence[Chunk],
    schema: GraphSchema,
    *,
    min_confidence: float,
    fail_on_error: bool,
) -> Extraction:
    """The valid candidates, with an issue recorded for each problem of the dropped ones (after
    the extractor's own issues); PlanningError instead when ``fail_on_error`` and anything is
    wrong."""
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    issues = list(extraction.issues)
    entities: list[EntityCandidate] = []
    for entity in extraction.entities:
        found = _entity_problems(entity, schema, by_id, min_confidence)
        if found:
            issues += _issues(f"entity {entity.entity_type} {entity.name!r}", entity, found)
        else:
            entities.append(entity)
    known = {
        (entity.entity_type, key)
        for entity in entities
        for key in strong_names(entity.name, entity.aliases)
    }
    relations: list[RelationCandidate] = []
    for relation in extraction.relations:
        found = _relation_problems(relation, schema, by_id, min_confidence, known)
        if found:
            issues += _issues(f"relation {_relation_text(relation)}", relation, found)
        else:
            relations.append(relation)
    if fail_on_error and issues:
        raise PlanningError(
            f"the extraction has {len(issues)} problem(s) and fail_on_extraction_error is set: "
            + "; ".join(f"{issue.code}: {issue.message}" for issue in issues)
        )
    return Extraction(entities=tuple(entities), relations=tuple(relations), issues=tuple(issues))


def _entity_problems(
    entity: EntityCandidate,
    schema: GraphSchema,
    chunks: Mapping[str, Chunk],
    min_confidence: float,
) -> list[Problem]:
    node_type = schema.node_types.get(entity.entity_type)
    if node_type is None:
        return [Problem("UNKNOWN_NODE_TYPE", f"node type {entity.entity_type!r} is not declared")]
    problems = property_problems(node_type.properties, entity.properties)
    too_long = [n for n in (entity.name, *entity.aliases) if len(n) > MAX_NAME_CHARS]
    if too_long:
        problems.append(
            Problem("NAME_TOO_LONG", f"a name or alias is longer than {MAX_NAME_CHARS} characters")
        )
    if not normalize_name(entity.name):
        problems.append(Problem("EMPTY_NAME", "the name is blank"))
    elif is_pronoun(entity.name):
        problems.append(Problem("PRONOUN_NAME", "a pronoun does not name an entity"))
    return problems + _quality_problems(entity.confidence, entity.evidence, chunks, min_confidence)


def _relation_problems(
    relation: RelationCandidate,
    schema: GraphSchema,
    chunks: Mapping[str, Chunk],
    min_confidence: float,
    known: set[tuple[str, str]],
) -> list[Problem]:
    relation_type = schema.relation_types.get(relation.relation_type)
    if relation_type is None:
        return [
            Problem(
                "UNKNOWN_RELATION_TYPE",
                f"relation type {relation.relation_type!r} is not declared",
            )
        ]
    problems = property_problems(relation_type.properties, relation.properties)
    for side, ref, allowed in (
        ("source", relation.source, relation_type.sources),
        ("target", relation.target, relation_type.targets),
    ):
        if ref.entity_type not in allowed:
            problems.append(
                Problem(
                    "ENDPOINT_TYPE_NOT_ALLOWED",
                    f"{side} type {ref.entity_type} is not one of {list(allowed)}",
                )
            )
        elif (ref.entity_type, normalize_name(ref.name)) not in known or is_pronoun(ref.name):
            problems.append(
                Problem(
                    "UNKNOWN_ENDPOINT",
                    f"{side} {ref.entity_type} {ref.name!r} is not among the valid entities",
                )
            )
    return problems + _quality_problems(
        relation.confidence, relation.evidence, chunks, min_confidence
    )


def _quality_problems(
    confidence: float,
    evidence: Sequence[CandidateEvidence],
    chunks: Mapping[str, Chunk],
    min_confidence: float,
) -> list[Problem]:
    problems = []
    if confidence < min_confidence:
        problems.append(
            Problem("LOW_CONFIDENCE", f"confidence {confidence:g} is below {min_confidence:g}")
        )
    if not evidence:
        problems.append(Problem("NO_EVIDENCE", "no evidence"))
    for item in evidence:
        chunk = chunks.get(item.chunk_id)
        if chunk is None:
            problems.append(Problem("UNKNOWN_CHUNK", f"evidence names chunk {item.chunk_id!r}"))
        elif not _quoted(chunk, item):
            problems.append(
                Problem(
                    "QUOTE_NOT_IN_CHUNK",
                    f"the quote is not the chunk's text at [{item.start}, {item.end})",
                )
            )
    return problems


def _quoted(chunk: Chunk, evidence: CandidateEvidence) -> bool:
    if not chunk.start <= evidence.start < evidence.end <= chunk.end:
        return False
    local = evidence.start - chunk.start
    return chunk.text[local : local + evidence.end - evidence.start] == evidence.quote


def _issues(
    what: str, candidate: EntityCandidate | RelationCandidate, problems: Sequence[Problem]
) -> list[ExtractionIssue]:
    chunk_id = candidate.evidence[0].chunk_id if candidate.evidence else None
    return [
        ExtractionIssue(code=p.code, message=f"{what}: {p.message}", chunk_id=chunk_id)
        for p in problems
    ]


def _relation_text(relation: RelationCandidate) -> str:
    return (
        f"{relation.source.entity_type} {relation.source.name!r} -[{relation.relation_type}]-> "
        f"{relation.target.entity_type} {relation.target.name!r}"
    )


__all__ = ["MAX_NAME_CHARS", "Problem", "property_problems", "validate_extraction"]
