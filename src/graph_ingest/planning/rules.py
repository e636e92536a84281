"""The ``rules`` extractor: deterministic, offline, configured next to the graph schema.

``schema.extraction["rules"]`` declares a gazetteer and relation rules::

    extraction:
      rules:
        entities:                       # node type -> the names it recognises
          Person:
            - {name: Alice Chen, aliases: [Alice], properties: {role: engineer}}
            - Bob Stone                 # a bare name
        relations:
          - {type: OWNS, pattern: "{source} owns {target}"}
          - type: DEPENDS_ON            # a regular expression with groups source and target
            regex: '(?P<source>[A-Z]\\w+ Service) relies on (?P<target>[A-Z]\\w+ API)'
            source: [System]            # endpoint types (default: all the relation type allows)
            target: [System]

Names match case-insensitively, whole words (a name's edge that is a letter or digit does not
match inside a longer word; Chinese names match anywhere), whitespace inside a name matches any
whitespace, and the longest name wins where two overlap. A phrase pattern's ``{source}`` and
``{target}`` match the gazetteer's names of the endpoint types, and ``[words]`` in it are optional
(``"{source} leads [the] {target}"``). A regex group's text is looked up in
the gazetteer; a name it does not know becomes a new entity when its side allows one type.

Every candidate carries its evidence: the chunk, the exact quote, document offsets (at most
``MAX_EVIDENCE`` per candidate, the first ones). The rule set's hash is the extractor's identity:
changing the rules re-extracts documents planned with the old ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    Chunk,
    EntityCandidate,
    EntityRef,
    Extraction,
    ExtractionIssue,
    RelationCandidate,
)
from graph_ingest.domain.fingerprint import fingerprint_of
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.state import normalize_name
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.rules_config import (
    compile_gazetteer,
    compile_rules,
    mention_regex,
    parse_rules,
)

MAX_EVIDENCE = 10
# Bump when matching changes meaning: documents extracted by the old engine are extracted again.
ENGINE_VERSION = "rules.v1"


@dataclass(frozen=True, slots=True)
class _Key:
    entity_type: str
    normalized: str


@dataclass(slots=True)
class _Evidence:
    """Where a candidate was read, each place once; the first MAX_EVIDENCE of them are kept."""

    spans: dict[tuple[str, int, int], CandidateEvidence] = field(default_factory=dict)

    def add(self, chunk: Chunk, start: int, end: int) -> None:
        at = (chunk.chunk_id, chunk.start + start, chunk.start + end)
        self.spans.setdefault(
            at,
            CandidateEvidence(
                chunk_id=chunk.chunk_id, quote=chunk.text[start:end], start=at[1], end=at[2]
            ),
        )

    def first(self) -> tuple[CandidateEvidence, ...]:
        return tuple(sorted(self.spans.values(), key=lambda e: (e.start, e.end))[:MAX_EVIDENCE])


@dataclass(slots=True)
class _Found:
    """An entity candidate being collected."""

    entity_type: str
    name: str
    aliases: tuple[str, ...] = ()
    properties: dict[str, PropertyValue] = field(default_factory=dict)
    evidence: _Evidence = field(default_factory=_Evidence)


class RulesExtractor:
    """Built from a graph schema whose ``extraction.rules`` it compiles (GraphSchemaError, naming
    the path, if they do not fit the schema)."""

    name = "rules"

    def __init__(self, schema: GraphSchema) -> None:
        self._schema_version = schema.version
        self._config = parse_rules(schema)
        gazetteer = compile_gazetteer(self._config, schema)
        self._entries = gazetteer.entries
        self._mentions = mention_regex(gazetteer)
        self._rules = compile_rules(self._config, schema, gazetteer)

    def identity(self) -> dict[str, Any]:
        return {
            "engine": ENGINE_VERSION,
            "rules": fingerprint_of(self._config.model_dump(mode="json")),
        }

    def extract(self, chunks: Sequence[Chunk], schema: GraphSchema) -> Extraction:
        if schema.version != self._schema_version:
            raise ExtractionFailed(
                f"the rules were compiled for graph schema {self._schema_version!r}, "
                f"not {schema.version!r}",
                code=StatusCode.FAILED_PRECONDITION,
            )
        entities: dict[_Key, _Found] = {}
        relations: dict[tuple[str, _Key, _Key], _Evidence] = {}
        issues: list[ExtractionIssue] = []
        for chunk in chunks:
            for key, start, end in self._mentions_in(chunk):
                self._entity(entities, key).evidence.add(chunk, start, end)
            for rule in self._rules:
                for match in rule.regex.finditer(chunk.text):
                    source = self._endpoint(entities, chunk, match, "source", rule.sources, issues)
                    target = self._endpoint(entities, chunk, match, "target", rule.targets, issues)
                    if source is not None and target is not None:
                        evidence = relations.setdefault(
                            (rule.relation_type, source, target), _Evidence()
                        )
                        evidence.add(chunk, match.start(), match.end())
        return Extraction(
            entities=tuple(
                EntityCandidate(
                    entity_type=f.entity_type,
                    name=f.name,
                    aliases=f.aliases,
                    properties=f.properties,
                    evidence=f.evidence.first(),
                )
                for f in _in_document_order(entities.values())
            ),
            relations=tuple(
                RelationCandidate(
                    relation_type=relation_type,
                    source=EntityRef(entity_type=s.entity_type, name=entities[s].name),
                    target=EntityRef(entity_type=t.entity_type, name=entities[t].name),
                    evidence=evidence.first(),
                )
                for (relation_type, s, t), evidence in relations.items()
            ),
            issues=tuple(issues),
        )

    def _mentions_in(self, chunk: Chunk) -> Iterator[tuple[_Key, int, int]]:
        if self._mentions is None:
            return
        for match in self._mentions.finditer(chunk.text):
            for entity_type, entry in self._entries.get(normalize_name(match.group()), {}).items():
                yield _Key(entity_type, normalize_name(entry.name)), match.start(), match.end()

    def _entity(self, entities: dict[_Key, _Found], key: _Key, spelled: str = "") -> _Found:
        """The candidate of ``key``: a gazetteer entry's, or a new name spelled ``spelled``."""
        found = entities.get(key)
        if found is None:
            entry = self._entries.get(key.normalized, {}).get(key.entity_type)
            found = (
                _Found(key.entity_type, entry.name, entry.aliases, dict(entry.properties))
                if entry is not None
                else _Found(key.entity_type, spelled)
            )
            entities[key] = found
        return found

    def _endpoint(
        self,
        entities: dict[_Key, _Found],
        chunk: Chunk,
        match: re.Match[str],
        side: str,
        types: tuple[str, ...],
        issues: list[ExtractionIssue],
    ) -> _Key | None:
        text = match.group(side) or ""
        normalized = normalize_name(text)
        entries = self._entries.get(normalized, {})
        known = [t for t in types if t in entries]
        if normalized and (len(known) == 1 or (not known and len(types) == 1)):
            # a gazetteer entry is keyed by its name, whichever of its names matched
            key = (
                _Key(known[0], normalize_name(entries[known[0]].name))
                if known
                else _Key(types[0], normalized)
            )
            self._entity(entities, key, text.strip()).evidence.add(chunk, *match.span(side))
            return key
        reason = f"a name of several types {known}" if known else f"not a name of {list(types)}"
        issues.append(
            ExtractionIssue(
                code="UNRESOLVED_ENDPOINT",
                message=f"the {side} {text!r} of a rule match is {reason}",
                chunk_id=chunk.chunk_id,
            )
        )
        return None


def _in_document_order(found: Iterable[_Found]) -> list[_Found]:
    return sorted(
        found, key=lambda f: (min(e.start for e in f.evidence.spans.values()), f.entity_type)
    )


__all__ = ["ENGINE_VERSION", "MAX_EVIDENCE", "RulesExtractor"]
