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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError, model_validator

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
from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import NonEmptyText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.state import normalize_name
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed, GraphSchemaError
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.names import is_pronoun
from graph_ingest.planning.validation import property_problems

MAX_EVIDENCE = 10
# Bump when matching changes meaning: documents extracted by the old engine are extracted again.
ENGINE_VERSION = "rules.v1"
_PATH = "extraction.rules"
_PLACEHOLDER = re.compile(r"\{(source|target)\}")
_OPTIONAL = re.compile(r"\[([^\[\]]+)\](\s*)")
_LITERAL_PARTS = re.compile(r"(\[[^\[\]]+\]\s*|\s+)")


class GazetteerEntry(FrozenModel):
    name: NonEmptyText
    aliases: tuple[NonEmptyText, ...] = ()
    properties: dict[Identifier, PropertyValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class RelationRule(FrozenModel):
    type: Identifier
    pattern: NonEmptyText | None = None
    regex: NonEmptyText | None = None
    source: tuple[Identifier, ...] | None = None
    target: tuple[Identifier, ...] | None = None
    ignore_case: bool = True

    @model_validator(mode="after")
    def one_form(self) -> RelationRule:
        if (self.pattern is None) == (self.regex is None):
            raise ValueError("give either pattern or regex")
        return self


class RulesConfig(FrozenModel):
    entities: dict[Identifier, tuple[GazetteerEntry, ...]] = Field(default_factory=dict)
    relations: tuple[RelationRule, ...] = ()


@dataclass(frozen=True, slots=True)
class _Rule:
    relation_type: str
    regex: re.Pattern[str]
    sources: tuple[str, ...]
    targets: tuple[str, ...]


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
        self._config = _parse(schema)
        gazetteer = _gazetteer(self._config, schema)
        self._entries = gazetteer.entries
        self._mentions = _mention_regex(gazetteer)
        self._rules = _compiled_rules(self._config, schema, gazetteer)

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


# -- compiling the configuration ---------------------------------------------------------------


def _parse(schema: GraphSchema) -> RulesConfig:
    raw = schema.extraction.get("rules")
    if raw is None:
        raise GraphSchemaError(f"graph schema {schema.version}: {_PATH}: missing")
    try:
        return RulesConfig.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join([_PATH, *(str(p) for p in e['loc'])])}: {e['msg']}" for e in error.errors()
        )
        raise GraphSchemaError(f"graph schema {schema.version}: {problems}") from None


@dataclass(frozen=True, slots=True)
class _Gazetteer:
    entries: Mapping[str, Mapping[str, GazetteerEntry]]
    """normalized name -> entity type -> the entry the name is a name of"""
    spellings: Mapping[str, frozenset[str]]
    """entity type -> every way its names are matched: as written, and normalized"""

    def names_of(self, types: Iterable[str]) -> list[str]:
        """The spellings of the names of ``types``, longest first (the longest match wins)."""
        names = {n for t in types for n in self.spellings.get(t, ())}
        return sorted(names, key=lambda n: (-len(n), n))


def _gazetteer(config: RulesConfig, schema: GraphSchema) -> _Gazetteer:
    entries: dict[str, dict[str, GazetteerEntry]] = {}
    spellings: dict[str, set[str]] = {}
    problems: list[str] = []
    for entity_type, listed in config.entities.items():
        node_type = schema.node_types.get(entity_type)
        if node_type is None:
            problems.append(f"{_PATH}.entities.{entity_type}: not a node type of the schema")
            continue
        for index, entry in enumerate(listed):
            path = f"{_PATH}.entities.{entity_type}.{index}"
            problems += [
                f"{path}.properties: {p.message}"
                for p in property_problems(node_type.properties, entry.properties)
            ]
            for where, name in (("name", entry.name), *(("aliases", a) for a in entry.aliases)):
                normalized = normalize_name(name)
                if not normalized or is_pronoun(name):
                    problems.append(f"{path}.{where}: {name!r} cannot name an entity")
                    continue
                spellings.setdefault(entity_type, set()).update((name, normalized))
                other = entries.setdefault(normalized, {}).setdefault(entity_type, entry)
                if other is not entry:
                    problems.append(
                        f"{path}.{where}: {name!r} already names {entity_type} {other.name!r}"
                    )
    _raise(schema, problems)
    return _Gazetteer(entries, {t: frozenset(n) for t, n in spellings.items()})


def _compiled_rules(config: RulesConfig, schema: GraphSchema, gazetteer: _Gazetteer) -> list[_Rule]:
    rules: list[_Rule] = []
    problems: list[str] = []
    for index, rule in enumerate(config.relations):
        path = f"{_PATH}.relations.{index}"
        relation_type = schema.relation_types.get(rule.type)
        if relation_type is None:
            problems.append(f"{path}.type: {rule.type!r} is not a relation type of the schema")
            continue
        sides = {}
        for side, given, allowed in (
            ("source", rule.source, relation_type.sources),
            ("target", rule.target, relation_type.targets),
        ):
            chosen = allowed if given is None else given
            outside = [t for t in chosen if t not in allowed]
            if outside:
                problems.append(f"{path}.{side}: {rule.type} does not allow {outside}")
            sides[side] = tuple(t for t in chosen if t in allowed)
        flags = re.IGNORECASE if rule.ignore_case else 0
        try:
            regex = (
                re.compile(rule.regex, flags)
                if rule.regex is not None
                else _phrase_regex(rule.pattern or "", sides, gazetteer, flags)
            )
        except (re.error, ValueError) as error:
            problems.append(f"{path}.{'regex' if rule.regex else 'pattern'}: {error}")
            continue
        missing = {"source", "target"} - set(regex.groupindex)
        if missing:
            problems.append(f"{path}.regex: needs the named groups {sorted(missing)}")
            continue
        rules.append(_Rule(rule.type, regex, sides["source"], sides["target"]))
    _raise(schema, problems)
    return rules


def _phrase_regex(
    pattern: str, sides: Mapping[str, tuple[str, ...]], gazetteer: _Gazetteer, flags: int
) -> re.Pattern[str]:
    parts = _PLACEHOLDER.split(pattern)
    if sorted(parts[1::2]) != ["source", "target"]:
        raise ValueError("needs {source} and {target}, once each")
    pieces = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            pieces.append(_literal(part))
            continue
        names = gazetteer.names_of(sides[part])
        if not names:
            raise ValueError(f"the gazetteer has no names of the {part} types {sides[part]}")
        pieces.append(f"(?P<{part}>{_names(names)})")
    return re.compile("".join(pieces), flags)


def _mention_regex(gazetteer: _Gazetteer) -> re.Pattern[str] | None:
    names = gazetteer.names_of(gazetteer.spellings)
    return re.compile(_names(names), re.IGNORECASE) if names else None


def _names(normalized: Sequence[str]) -> str:
    """An alternation of names, each whole-word where its edge is a letter or digit."""
    return "|".join(_bounded(name) for name in normalized)


def _bounded(name: str) -> str:
    before = r"(?<!\w)" if _word_edge(name[0]) else ""
    after = r"(?!\w)" if _word_edge(name[-1]) else ""
    return f"{before}{_literal(name)}{after}"


def _word_edge(char: str) -> bool:
    # CJK scripts (from U+2E80) write words without spaces: a name there matches anywhere.
    return (char.isalnum() or char == "_") and ord(char) < 0x2E80


def _literal(text: str) -> str:
    """``text`` as a regex matching itself, with any whitespace for whitespace and ``[words]`` (in
    a phrase pattern) optional."""
    pieces = []
    for part in _LITERAL_PARTS.split(text):
        optional = _OPTIONAL.fullmatch(part)
        if optional is not None:
            space = r"\s+" if optional.group(2) else ""
            pieces.append(f"(?:{_literal(optional.group(1))}{space})?")
        elif part.isspace():
            pieces.append(r"\s+")
        elif part:
            pieces.append(re.escape(part))
    return "".join(pieces)


def _raise(schema: GraphSchema, problems: Sequence[str]) -> None:
    if problems:
        raise GraphSchemaError(f"graph schema {schema.version}: " + "; ".join(problems))


__all__ = ["ENGINE_VERSION", "MAX_EVIDENCE", "RulesConfig", "RulesExtractor"]
