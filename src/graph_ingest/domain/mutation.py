"""Graph mutations: what a plan asks the graph to become. Identity is stable and application-owned."""

from __future__ import annotations

from typing import Protocol

from pydantic import Field, model_validator

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import MAX_SAFE_INTEGER, NUL, SafeInteger, StoredId
from graph_ingest.domain.model import FrozenModel, reject_duplicates

Scalar = str | int | float | bool
PropertyValue = Scalar | list[Scalar] | None


def _validate_properties(properties: dict[str, PropertyValue]) -> dict[str, PropertyValue]:
    """Refuse what a plan may not carry (``limits``): a NUL in text, an integer RFC 8785 rounds.

    Runs for every upsert of every decoded plan: a plain str, int, bool, float or None is checked
    inline; a list or anything else (a subclass) goes through ``_check_value`` item by item."""
    for name, value in properties.items():
        if type(value) is str:
            if NUL in value:
                _check_value(name, value)
        elif type(value) is int:
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                _check_value(name, value)
        elif type(value) is bool or type(value) is float or value is None:
            continue
        else:
            for item in value if isinstance(value, list) else [value]:
                _check_value(name, item)
    return properties


def _check_value(name: str, item: object) -> None:
    if isinstance(item, str):
        if NUL in item:
            raise ValueError(
                f"property {name!r}: a NUL character (\\x00) is not allowed in a property value"
            )
    elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_SAFE_INTEGER:
        raise ValueError(
            f"property {name!r}: integer {item} is outside ±(2**53 - 1); "
            "store it as a string to keep it exact"
        )


class NodeUpsert(FrozenModel):
    """A node to create or update. Its property values are checked by the :class:`Mutation` that
    holds it (``_validate_properties``), in one pass over all its upserts."""

    node_id: StoredId
    labels: tuple[Identifier, ...] = ()
    properties: dict[Identifier, PropertyValue] = Field(default_factory=dict)


class EdgeIdentity(Protocol):
    @property
    def src(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def rank(self) -> int: ...


EdgeTuple = tuple[str, str, str, int]


def edge_identity(edge: EdgeIdentity) -> EdgeTuple:
    """An edge's identity (src, type, dst, rank), from the edge itself (building an EdgeKey costs
    a validation: this runs for every edge of every decoded plan)."""
    return (edge.src, edge.type, edge.dst, edge.rank)


def edge_identity_text(identity: EdgeTuple) -> str:
    """An edge's identity as people read it; two different edges may read alike (ids may hold
    any character): compare ``edge_identity``, never this."""
    src, type_, dst, rank = identity
    return f"({src})-[:{type_}#{rank}]->({dst})"


class EdgeKey(FrozenModel):
    """Edge identity: (src, type, dst, rank)."""

    src: StoredId
    type: Identifier
    dst: StoredId
    rank: SafeInteger = 0

    def sort_key(self) -> EdgeTuple:
        return edge_identity(self)

    def __str__(self) -> str:
        return edge_identity_text(edge_identity(self))


class EdgeUpsert(FrozenModel):
    """An edge to create or update; its property values are checked as a NodeUpsert's are."""

    src: StoredId
    type: Identifier
    dst: StoredId
    rank: SafeInteger = 0
    properties: dict[Identifier, PropertyValue] = Field(default_factory=dict)

    @property
    def key(self) -> EdgeKey:
        return EdgeKey(src=self.src, type=self.type, dst=self.dst, rank=self.rank)


class Mutation(FrozenModel):
    """Apply order: edge deletes, node deletes, node upserts, edge upserts."""

    node_upserts: tuple[NodeUpsert, ...] = ()
    edge_upserts: tuple[EdgeUpsert, ...] = ()
    node_deletes: tuple[StoredId, ...] = ()
    edge_deletes: tuple[EdgeKey, ...] = ()
    detach_deleted_nodes: bool = False
    deletes_if_unreferenced: bool = False
    """The deletes are the planner's "delete if no other document lists it" (stale relations,
    nodes no longer mentioned, retractions): the applier skips those another document lists
    when it applies them. False: deletes as written (a hand-written plan's)."""

    @model_validator(mode="after")
    def check_unique_identities(self) -> Mutation:
        # One validator for the whole mutation: a Python validator per upsert costs ~2 µs of
        # call overhead each, on every element of every decoded plan.
        for node in self.node_upserts:
            _validate_properties(node.properties)
        for edge in self.edge_upserts:
            _validate_properties(edge.properties)
        reject_duplicates("node upsert", [n.node_id for n in self.node_upserts])
        reject_duplicates(
            "edge upsert", [edge_identity(e) for e in self.edge_upserts], edge_identity_text
        )
        reject_duplicates("node delete", list(self.node_deletes))
        reject_duplicates(
            "edge delete", [edge_identity(e) for e in self.edge_deletes], edge_identity_text
        )
        both = self.upserted_node_ids() & set(self.node_deletes)
        if both:
            raise ValueError(f"nodes both upserted and deleted: {sorted(both)[:5]}")
        return self

    @property
    def is_empty(self) -> bool:
        return not (
            self.node_upserts or self.edge_upserts or self.node_deletes or self.edge_deletes
        )

    @property
    def element_count(self) -> int:
        return (
            len(self.node_upserts)
            + len(self.edge_upserts)
            + len(self.node_deletes)
            + len(self.edge_deletes)
        )

    def upserted_node_ids(self) -> frozenset[str]:
        return frozenset(n.node_id for n in self.node_upserts)

    def upserted_edge_keys(self) -> frozenset[EdgeKey]:
        return frozenset(e.key for e in self.edge_upserts)
