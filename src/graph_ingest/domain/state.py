"""Document state, fact sources and entity registrations: the bookkeeping a plan commits."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, model_validator

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.limits import (
    MAX_REVISION,
    NonEmptyText,
    Offset,
    StoredId,
    StoredText,
    check_index_key,
)
from graph_ingest.domain.model import FrozenModel, reject_duplicates
from graph_ingest.domain.mutation import EdgeKey, edge_text


class FactKind(StrEnum):
    NODE = "NODE"
    EDGE = "EDGE"


class Evidence(FrozenModel):
    """Where in the document a fact was read: a character span and the quoted text."""

    quote: StoredText
    start: Offset
    end: Offset


class FactSource(FrozenModel):
    """The document supports this fact (a node id, or an edge key rendered by ``fact_id_of``)."""

    fact_id: NonEmptyText
    kind: FactKind
    evidence: tuple[Evidence, ...] = ()


def fact_id_of(edge: EdgeKey) -> str:
    return f"{edge.src}|{edge.type}|{edge.dst}|{edge.rank}"


class DocumentState(FrozenModel):
    """What the graph holds for one document after its plan committed."""

    space: Identifier
    document_id: StoredId
    revision: int = Field(ge=0, le=MAX_REVISION)
    operation_id: StoredId
    content_hash: StoredId
    document_version: StoredText
    node_ids: tuple[StoredId, ...] = ()
    edge_keys: tuple[EdgeKey, ...] = ()
    superseded_edge_keys: tuple[EdgeKey, ...] = ()
    fact_sources: tuple[FactSource, ...] = ()
    committed_at: datetime | None = None

    @model_validator(mode="after")
    def check_unique_identities(self) -> DocumentState:
        # Checked at planning time: a repeat found only at commit would strand the plan after
        # its graph write (and the fingerprint, which sorts sets, would not tell the copies apart).
        reject_duplicates("node id", self.node_ids)
        reject_duplicates("edge key", [edge_text(k) for k in self.edge_keys])
        reject_duplicates("superseded edge key", [edge_text(k) for k in self.superseded_edge_keys])
        reject_duplicates("fact source", [f.fact_id for f in self.fact_sources])
        for fact in self.fact_sources:
            check_index_key(
                f"fact id {fact.fact_id[:80]!r}", self.space, self.document_id, fact.fact_id
            )
        return self


class EntityRegistration(FrozenModel):
    """(space, entity_type, normalized_name) -> node_id, with aliases that accumulate."""

    space: Identifier
    entity_type: Identifier
    name: NonEmptyText
    normalized_name: StoredId
    node_id: StoredId
    aliases: tuple[StoredText, ...] = ()

    @model_validator(mode="after")
    def check_key_size(self) -> EntityRegistration:
        check_index_key(
            f"registry name {self.normalized_name[:80]!r}",
            self.space,
            self.entity_type,
            self.normalized_name,
        )
        return self


def normalize_name(name: str) -> str:
    """Case- and whitespace-insensitive form used as the registry key."""
    return " ".join(name.casefold().split())
