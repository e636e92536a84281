"""Entity resolution: which node each entity candidate is, by the registry of its space.

* Candidates of one type that share a strong name (the normalised name or a non-pronoun alias)
  are one entity; so are candidates the registry binds to the same node.
* Every strong name of an entity is looked up in the registry — one read for the document — by
  (space, type, normalised name). A name bound to a node makes the entity that node. Names bound
  to two different nodes make the entity ambiguous: the plan fails (PlanningError naming them).
* An entity the registry does not know gets a new node id derived from space, type and its
  canonical (first-seen) name: deterministic, never random, never time. The space is part of it
  because node ids, not spaces, identify nodes in the graph: the same name in two spaces is two
  nodes.
* Registrations bind the canonical name (with every alias as written) and each alias as a name of
  its own, so the next document that names the entity only by an alias finds the same node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from graph_ingest.domain.candidates import CandidateEvidence, EntityCandidate
from graph_ingest.domain.fingerprint import canonical_json
from graph_ingest.domain.mutation import PropertyValue
from graph_ingest.domain.state import EntityRegistration, normalize_name
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.names import is_pronoun, strong_names

RegistryKey = tuple[str, str]
"""(entity_type, normalized_name)"""


class RegistryView(Protocol):
    def registry_lookup(
        self, space: str, keys: Sequence[RegistryKey]
    ) -> dict[RegistryKey, str]: ...


@dataclass(frozen=True, slots=True)
class ResolvedEntity:
    node_id: str
    entity_type: str
    name: str
    keys: tuple[str, ...]
    """Its strong names, normalised: the canonical name's first."""
    aliases: tuple[str, ...]
    """Every other strong name, as first written."""
    properties: dict[str, PropertyValue]
    evidence: tuple[CandidateEvidence, ...]

    def registrations(self, space: str) -> list[EntityRegistration]:
        own = EntityRegistration(
            space=space,
            entity_type=self.entity_type,
            name=self.name,
            normalized_name=self.keys[0],
            node_id=self.node_id,
            aliases=self.aliases,
        )
        return [own] + [
            EntityRegistration(
                space=space,
                entity_type=self.entity_type,
                name=alias,
                normalized_name=normalize_name(alias),
                node_id=self.node_id,
            )
            for alias in self.aliases
        ]


@dataclass(frozen=True, slots=True)
class Resolution:
    entities: tuple[ResolvedEntity, ...]
    _by_key: dict[RegistryKey, str] = field(repr=False)

    def node_of(self, entity_type: str, name: str) -> str:
        """The node a name (canonical or alias, any spelling that normalises alike) is; KeyError
        for a name of no resolved entity (validation lets no relation through to one)."""
        return self._by_key[(entity_type, normalize_name(name))]

    def registrations(self, space: str) -> tuple[EntityRegistration, ...]:
        return tuple(r for entity in self.entities for r in entity.registrations(space))


def new_node_id(space: str, entity_type: str, normalized_name: str) -> str:
    material = canonical_json([space, entity_type, normalized_name])
    return "ent_" + hashlib.sha256(material).hexdigest()[:32]


def resolve_entities(
    space: str, candidates: Sequence[EntityCandidate], registry: RegistryView
) -> Resolution:
    groups = _groups_sharing_a_name(candidates)
    keys = sorted({(c.entity_type, k) for c in candidates for k in _keys(c)})
    bound = registry.registry_lookup(space, keys)
    by_node: dict[str, list[EntityCandidate]] = {}
    ambiguous: list[str] = []
    for group in groups:
        entity_type = group[0].entity_type
        found: dict[str, set[str]] = {}
        for candidate in group:
            for key in _keys(candidate):
                node = bound.get((entity_type, key))
                if node is not None:
                    found.setdefault(node, set()).add(key)
        if len(found) > 1:
            ambiguous.append(
                f"{entity_type} {group[0].name!r} names "
                + ", ".join(f"node {n!r} (as {sorted(ks)})" for n, ks in sorted(found.items()))
            )
            continue
        node = next(iter(found), None) or new_node_id(space, entity_type, _keys(group[0])[0])
        by_node.setdefault(node, []).extend(group)
    if ambiguous:
        raise PlanningError(
            f"ambiguous entities in space {space!r}: the registry binds their names to more "
            "than one node: " + "; ".join(ambiguous),
            code=StatusCode.FAILED_PRECONDITION,
        )
    entities = tuple(_merged(node, group) for node, group in by_node.items())
    index = {(e.entity_type, k): e.node_id for e in entities for k in e.keys}
    return Resolution(entities=entities, _by_key=index)


def _keys(candidate: EntityCandidate) -> tuple[str, ...]:
    return strong_names(candidate.name, candidate.aliases)


def _groups_sharing_a_name(candidates: Sequence[EntityCandidate]) -> list[list[EntityCandidate]]:
    """Candidates in groups (first-seen order): one type, linked by shared strong names."""
    parent = list(range(len(candidates)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[RegistryKey, int] = {}
    for index, candidate in enumerate(candidates):
        for key in _keys(candidate):
            first = owner.setdefault((candidate.entity_type, key), index)
            a, b = root(first), root(index)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[EntityCandidate]] = {}
    for index, candidate in enumerate(candidates):
        groups.setdefault(root(index), []).append(candidate)
    return list(groups.values())


def _merged(node_id: str, group: Sequence[EntityCandidate]) -> ResolvedEntity:
    """One entity from its candidates: the first one's name, every other strong name an alias,
    properties first-seen per name, evidence in document order."""
    canonical = group[0].name
    spellings: dict[str, str] = {}
    for candidate in group:
        for spelled in (candidate.name, *candidate.aliases):
            key = normalize_name(spelled)
            if key and not is_pronoun(spelled):
                spellings.setdefault(key, spelled.strip())
    keys = tuple(spellings)
    properties: dict[str, PropertyValue] = {}
    for candidate in group:
        for name, value in candidate.properties.items():
            properties.setdefault(name, value)
    return ResolvedEntity(
        node_id=node_id,
        entity_type=group[0].entity_type,
        name=canonical.strip(),
        keys=keys,
        aliases=tuple(spellings[k] for k in keys[1:]),
        properties=properties,
        evidence=_evidence(c.evidence for c in group),
    )


def _evidence(groups: Iterable[Sequence[CandidateEvidence]]) -> tuple[CandidateEvidence, ...]:
    unique = {(e.start, e.end, e.chunk_id): e for group in groups for e in group}
    return tuple(unique[k] for k in sorted(unique))


__all__ = [
    "RegistryKey",
    "RegistryView",
    "Resolution",
    "ResolvedEntity",
    "new_node_id",
    "resolve_entities",
]
