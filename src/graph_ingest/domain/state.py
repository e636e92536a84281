"""Document state, fact sources and entity registrations: the bookkeeping a plan commits."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
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
from graph_ingest.domain.mutation import EdgeKey, edge_identity, edge_identity_text


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
    kept_edge_keys: tuple[EdgeKey, ...] = ()
    """Edges an earlier revision listed that this one no longer does, kept in the graph by the
    KEEP stale-relation policy: still the document's, so reconcile expects them."""
    base_operation_id: StoredId | None = None
    """The operation whose committed state this one was planned on (None: planned on no state,
    a new document). The compare-and-set binds the plan to it (DESIGN.md §7a)."""
    fact_sources: tuple[FactSource, ...] = ()
    schema_version: StoredText | None = None
    """The graph schema version the state was planned with (None: planned by hand, or retracted)."""
    extraction_fingerprint: StoredText | None = None
    """What decided the extraction (extractor, its identity, schema version, content): a state
    with the same one and the same content and versions needs no new extraction. None when the
    state holds no extraction (hand-written plans, retractions)."""
    source_updated_at: datetime | None = None
    """When the source last changed the document, as its producer said: a request older than
    this is out of order."""
    committed_at: datetime | None = None

    @model_validator(mode="after")
    def check_unique_identities(self) -> DocumentState:
        # Checked at planning time: a repeat found only at commit would strand the plan after
        # its graph write (and the fingerprint, which sorts sets, would not tell the copies apart).
        reject_duplicates("node id", self.node_ids)
        for what, keys in (
            ("edge key", self.edge_keys),
            ("superseded edge key", self.superseded_edge_keys),
            ("kept edge key", self.kept_edge_keys),
        ):
            reject_duplicates(what, [edge_identity(k) for k in keys], edge_identity_text)
        reject_duplicates("fact source", [f.fact_id for f in self.fact_sources])
        for fact in self.fact_sources:
            check_index_key(
                "fact id", self.space, self.document_id, fact.fact_id, shown=fact.fact_id
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
            "registry name",
            self.space,
            self.entity_type,
            self.normalized_name,
            shown=self.normalized_name,
        )
        return self


def normalize_name(name: str) -> str:
    """The registry key of a name: NFKC, whitespace trimmed and collapsed, casefolded.

    NFKC first, so full-width and compatibility forms (U+FF21.., U+FB01 "fi") meet their plain
    spelling; casefold after it, then NFKC again (casefolding can leave a string that is not in
    NFKC): the key is a fixed point, normalising it again changes nothing."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return " ".join(folded.split())


@dataclass(frozen=True, slots=True)
class CommittedRevision:
    """The current committed state of a document, as far as the apply algorithm needs it."""

    space: str
    document_id: str
    revision: int
    operation_id: str
