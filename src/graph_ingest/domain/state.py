"""Document state, fact sources and entity registrations: the bookkeeping a plan commits."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, model_validator

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.model import FrozenModel, reject_duplicates
from graph_ingest.domain.mutation import EdgeKey


class FactKind(StrEnum):
    NODE = "NODE"
    EDGE = "EDGE"


class Evidence(FrozenModel):
    """Where in the document a fact was read: a character span and the quoted text."""

    quote: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)


class FactSource(FrozenModel):
    """The document supports this fact (a node id, or an edge key rendered by ``fact_id_of``)."""

    fact_id: str = Field(min_length=1)
    kind: FactKind
    evidence: tuple[Evidence, ...] = ()


def fact_id_of(edge: EdgeKey) -> str:
    return f"{edge.src}|{edge.type}|{edge.dst}|{edge.rank}"


class DocumentState(FrozenModel):
    """What the graph holds for one document after its plan committed."""

    space: Identifier
    document_id: str = Field(min_length=1)
    revision: int = Field(ge=0)
    operation_id: str = Field(min_length=1)
    content_hash: str = Field(min_length=1)
    document_version: str
    node_ids: tuple[str, ...] = ()
    edge_keys: tuple[EdgeKey, ...] = ()
    superseded_edge_keys: tuple[EdgeKey, ...] = ()
    fact_sources: tuple[FactSource, ...] = ()
    committed_at: datetime | None = None

    @model_validator(mode="after")
    def check_unique_identities(self) -> DocumentState:
        # Checked at planning time: a repeat found only at commit would strand the plan after
        # its graph write (and the fingerprint, which sorts sets, would not tell the copies apart).
        reject_duplicates("node id", self.node_ids)
        reject_duplicates("edge key", [str(k) for k in self.edge_keys])
        reject_duplicates("superseded edge key", [str(k) for k in self.superseded_edge_keys])
        reject_duplicates("fact source", [f.fact_id for f in self.fact_sources])
        return self


class EntityRegistration(FrozenModel):
    """(space, entity_type, normalized_name) -> node_id, with aliases that accumulate."""

    space: Identifier
    entity_type: Identifier
    name: str = Field(min_length=1)
    normalized_name: str = Field(min_length=1)
    node_id: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()


def normalize_name(name: str) -> str:
    """Case- and whitespace-insensitive form used as the registry key."""
    return " ".join(name.casefold().split())
