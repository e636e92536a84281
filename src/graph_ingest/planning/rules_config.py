"""The ``rules`` extractor's configuration (``extraction.rules`` of the graph schema), checked
against the schema and compiled: the gazetteer (every name of every entity type) and one regular
expression per relation rule.

Apart from the matching engine (``rules.py``) because compiling is done once, when the extractor
is built, and every problem it finds is reported at once (GraphSchemaError naming the path).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError, model_validator

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import NonEmptyText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.state import normalize_name
from graph_ingest.planning.errors import GraphSchemaError
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.names import is_pronoun
from graph_ingest.planning.validation import property_problems

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
class CompiledRule:
    relation_type: str
    regex: re.Pattern[str]
    sources: tuple[str, ...]
    targets: tuple[str, ...]


def parse_rules(schema: GraphSchema) -> RulesConfig:
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
class Gazetteer:
    entries: Mapping[str, Mapping[str, GazetteerEntry]]
    """normalized name -> entity type -> the entry the name is a name of"""
    spellings: Mapping[str, frozenset[str]]
    """entity type -> every way its names are matched: as written, and normalized"""

    def names_of(self, types: Iterable[str]) -> list[str]:
        """The spellings of the names of ``types``, longest first (the longest match wins)."""
        names = {n for t in types for n in self.spellings.get(t, ())}
        return sorted(names, key=lambda n: (-len(n), n))


def compile_gazetteer(config: RulesConfig, schema: GraphSchema) -> Gazetteer:
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
    return Gazetteer(entries, {t: frozenset(n) for t, n in spellings.items()})


def compile_rules(
    config: RulesConfig, schema: GraphSchema, gazetteer: Gazetteer
) -> list[CompiledRule]:
    rules: list[CompiledRule] = []
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
        rules.append(CompiledRule(rule.type, regex, sides["source"], sides["target"]))
    _raise(schema, problems)
    return rules


def _phrase_regex(
    pattern: str, sides: Mapping[str, tuple[str, ...]], gazetteer: Gazetteer, flags: int
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


def mention_regex(gazetteer: Gazetteer) -> re.Pattern[str] | None:
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


__all__ = [
    "CompiledRule",
    "Gazetteer",
    "GazetteerEntry",
    "RelationRule",
    "RulesConfig",
    "compile_gazetteer",
    "compile_rules",
    "mention_regex",
    "parse_rules",
]
