"""The graph schema: which node and relation types a space's graph may hold, loaded from YAML/JSON.

A file looks like::

    version: "2026-12-01"          # the schema version; part of every plan's identity
    node_types:
      Person:
        properties:
          role: {type: string}
          level: {type: integer, required: false}
          status: {type: string, enum: [active, retired]}
      System: {}
    relation_types:
      OWNS:
        sources: [Person]
        targets: [System]
        properties:
          since: {type: string}

Type, relation and property names are Cypher identifiers (``[A-Za-z_][A-Za-z0-9_]*``). A load
error names the file and the offending path.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import NonEmptyText, StoredText
from graph_ingest.domain.model import FrozenModel
from graph_ingest.planning.errors import GraphSchemaError


class PropertyType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    FLOAT = "float"
    BOOLEAN = "boolean"


class PropertySpec(FrozenModel):
    type: PropertyType = PropertyType.STRING
    required: bool = False
    enum: tuple[StoredText, ...] | None = None


class NodeType(FrozenModel):
    properties: dict[Identifier, PropertySpec] = Field(default_factory=dict)


class RelationType(FrozenModel):
    sources: tuple[Identifier, ...]
    targets: tuple[Identifier, ...]
    properties: dict[Identifier, PropertySpec] = Field(default_factory=dict)


class GraphSchema(FrozenModel):
    version: NonEmptyText
    node_types: dict[Identifier, NodeType]
    relation_types: dict[Identifier, RelationType] = Field(default_factory=dict)
    # Free-form configuration of the built-in extractors, declared next to the types they
    # produce (the ``rules`` extractor reads ``extraction["rules"]``).
    extraction: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def check_relation_endpoints(self) -> GraphSchema:
        unknown = [
            f"relation_types.{name}.{side}: unknown node type {t!r}"
            for name, rel in self.relation_types.items()
            for side, types in (("sources", rel.sources), ("targets", rel.targets))
            for t in types
            if t not in self.node_types
        ]
        if unknown:
            raise ValueError("; ".join(unknown))
        if not self.node_types:
            raise ValueError("node_types: at least one node type is required")
        return self


def parse_graph_schema(document: Any, *, source: str = "<schema>") -> GraphSchema:
    """Validate an already-parsed document; GraphSchemaError names ``source`` and every problem."""
    try:
        return GraphSchema.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors()
        )
        raise GraphSchemaError(f"graph schema {source}: {problems}") from None


def load_graph_schema(path: Path) -> GraphSchema:
    """Load a ``.yaml``/``.yml`` or ``.json`` schema file."""
    import json

    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise GraphSchemaError(f"graph schema {path}: cannot read: {error.strerror}") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise GraphSchemaError(
            f"graph schema {path}: not valid {path.suffix[1:]}: {error}"
        ) from None
    return parse_graph_schema(document, source=str(path))
