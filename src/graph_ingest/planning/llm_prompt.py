"""What the ``llm`` extractor sends: the JSON schema derived from the graph schema, the messages,
and the segments of a document cut and grouped so that no request exceeds its size bound.

A *segment* is what the model reads and cites: a whole chunk, or a piece of a chunk too large for
one request. Segments are numbered per request (``s1``, ``s2``...); the model names the segment of
every candidate, and evidence offsets are computed from the segment's place in the document.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from graph_ingest.domain.candidates import Chunk
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed
from graph_ingest.planning.graph_schema import GraphSchema, PropertySpec, PropertyType

PROMPT_VERSION = "1"
"""Bump with any change to the instructions, the derived schema or the request parameters below:
it is part of the extractor's identity, so a bump re-extracts every document."""

TEMPERATURE = 0.0
# Below this many characters of chunk text per request the fixed part of the prompt leaves too
# little room to be worth a call: the bound is a misconfiguration for this graph schema.
MIN_TEXT_BUDGET = 200

_JSON_TYPES = {
    PropertyType.STRING: "string",
    PropertyType.INTEGER: "integer",
    PropertyType.FLOAT: "number",
    PropertyType.BOOLEAN: "boolean",
}
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
# What the fields mean is said once, in the instructions, not in every type's variant.
_CONFIDENCE = {"type": "number"}
_QUOTES = {"type": "array", "items": _STRING}

INSTRUCTIONS = """\
You extract a knowledge graph from segments of one document.
Rules:
- List only entities and relations of the types in the JSON schema below, and only what the \
segment itself states.
- "segment" is the id of the segment a candidate is read from.
- "quotes" are one or more short passages copied character for character from that segment \
(same spelling, case, spacing and punctuation) that state the candidate; never paraphrase.
- "name" is the entity's name as the segment writes it; "aliases" are other names the segment \
uses for the same entity (never pronouns).
- A relation's source and target give the type and name of entities you also list.
- A property the segment does not state is null.
- "confidence" is between 0 and 1: how plainly the segment states the candidate.
Answer with one JSON object that matches this JSON schema, and nothing else:
"""

USER_PREFIX = "The segments, as a JSON array:\n"


@dataclass(frozen=True)
class Segment:
    ref: str
    chunk_id: str
    start: int
    """Offset of ``text`` in the whole document."""
    text: str


def response_schema(schema: GraphSchema) -> dict[str, Any]:
    """The JSON schema the model's answer must match (strict structured-output form: every
    property required, optional values nullable, no additional properties)."""
    entity_variants = [
        _object(
            {
                "segment": _STRING,
                "type": {"type": "string", "enum": [name]},
                "name": _STRING,
                "aliases": _STRINGS,
                "properties": _properties(node.properties),
                "confidence": _CONFIDENCE,
                "quotes": _QUOTES,
            }
        )
        for name, node in sorted(schema.node_types.items())
    ]
    properties: dict[str, Any] = {
        "entities": {"type": "array", "items": {"anyOf": entity_variants}}
    }
    relation_variants = [
        _object(
            {
                "segment": _STRING,
                "type": {"type": "string", "enum": [name]},
                "source": _endpoint(relation.sources),
                "target": _endpoint(relation.targets),
                "properties": _properties(relation.properties),
                "confidence": _CONFIDENCE,
                "quotes": _QUOTES,
            }
        )
        for name, relation in sorted(schema.relation_types.items())
    ]
    if relation_variants:
        properties["relations"] = {"type": "array", "items": {"anyOf": relation_variants}}
    return _object(properties)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _endpoint(types: Sequence[str]) -> dict[str, Any]:
    return _object({"type": {"type": "string", "enum": list(types)}, "name": _STRING})


def _properties(specs: dict[str, PropertySpec]) -> dict[str, Any]:
    return _object({name: _property(spec) for name, spec in sorted(specs.items())})


def _property(spec: PropertySpec) -> dict[str, Any]:
    json_type = _JSON_TYPES[spec.type]
    if spec.required:
        result: dict[str, Any] = {"type": json_type}
        if spec.enum is not None:
            result["enum"] = list(spec.enum)
        return result
    result = {"type": [json_type, "null"]}
    if spec.enum is not None:
        result["enum"] = [*spec.enum, None]
    return result


@dataclass(frozen=True)
class Prompt:
    """The fixed part of every request for one graph schema, and how its requests are built."""

    schema_version: str
    response_schema: dict[str, Any]
    system: str

    @classmethod
    def for_schema(cls, schema: GraphSchema) -> Prompt:
        derived = response_schema(schema)
        return cls(schema.version, derived, INSTRUCTIONS + _compact(derived))

    def body(self, *, model: str, segments: Sequence[Segment], max_tokens: int) -> dict[str, Any]:
        """A chat-completions request for ``segments``."""
        return {
            "model": model,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": user_message(segments)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "extraction",
                    "strict": True,
                    "schema": self.response_schema,
                },
            },
            "temperature": TEMPERATURE,
            "max_tokens": max_tokens,
        }

    def plan_requests(
        self, chunks: Sequence[Chunk], *, max_prompt_chars: int, max_segments: int
    ) -> list[list[Segment]]:
        """The segments of each request, in document order. Every request's messages hold at
        most ``max_prompt_chars`` characters and at most ``max_segments`` segments; a chunk too
        large for one request is cut into pieces (at whitespace where it can), each its own
        segment. Chunks with no text but whitespace are not sent."""
        # Room for the segments of one request: the messages less their fixed part (the
        # brackets of the array included); each segment costs its JSON object and a comma.
        room = max_prompt_chars - len(self.system) - len(USER_PREFIX) - 2
        wrapper = len(_segment_json(f"s{max_segments}", "")) + 1
        text_budget = room - wrapper
        if text_budget < MIN_TEXT_BUDGET:
            raise ExtractionFailed(
                f"the llm prompt for graph schema {self.schema_version!r} leaves"
                f" {max(text_budget, 0)} characters of document text within"
                f" GRAPH_INGEST_LLM__MAX_PROMPT_CHARS={max_prompt_chars};"
                f" at least {MIN_TEXT_BUDGET} are needed",
                code=StatusCode.FAILED_PRECONDITION,
            )
        return _group(_pieces(chunks, text_budget), room=room, wrapper=wrapper, most=max_segments)


def user_message(segments: Sequence[Segment]) -> str:
    return USER_PREFIX + "[" + ",".join(_segment_json(s.ref, s.text) for s in segments) + "]"


def _group(
    pieces: Iterator[tuple[str, int, str, int]], *, room: int, wrapper: int, most: int
) -> list[list[Segment]]:
    """Pieces, in order, into requests of at most ``most`` segments costing at most ``room``."""
    requests: list[list[tuple[int, str, str]]] = []
    used = 0
    for chunk_id, start, text, text_cost in pieces:
        cost = wrapper + text_cost
        if not requests or used + cost > room or len(requests[-1]) == most:
            requests.append([])
            used = 0
        requests[-1].append((start, chunk_id, text))
        used += cost
    return [
        [Segment(f"s{i}", chunk_id, start, text) for i, (start, chunk_id, text) in enumerate(r, 1)]
        for r in requests
    ]


def _pieces(chunks: Sequence[Chunk], text_budget: int) -> Iterator[tuple[str, int, str, int]]:
    """(chunk id, document offset, text, JSON-escaped length of the text) of every segment, each
    within ``text_budget``."""
    for chunk in chunks:
        text = chunk.text
        if not text.strip():
            continue
        position = 0
        while position < len(text):
            end, cost = position, 0
            while end < len(text) and cost + _char_cost(text[end]) <= text_budget:
                cost += _char_cost(text[end])
                end += 1
            if end < len(text):
                cut = max(
                    text.rfind(blank, position + (end - position) // 2, end) for blank in " \n"
                )
                if cut > position:
                    end = cut + 1
                    cost = sum(map(_char_cost, text[position:end]))
            yield chunk.chunk_id, chunk.start + position, text[position:end], cost
            position = end


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _segment_json(ref: str, text: str) -> str:
    return _compact({"segment": ref, "text": text})


# What json.dumps (ensure_ascii=False) writes for a character it escapes; any other is itself.
_ESCAPED_COST = {c: len(_compact(c)) - 2 for c in [*map(chr, range(0x20)), '"', "\\"]}


def _char_cost(char: str) -> int:
    return _ESCAPED_COST.get(char, 1)
