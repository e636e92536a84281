"""An ingest request: what a producer asks the planner to do with one document version."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import model_validator

from graph_ingest.domain.candidates import Extraction
from graph_ingest.domain.identifiers import Identifier
from graph_ingest.domain.ids import document_key
from graph_ingest.domain.limits import NonEmptyText, StoredId, StoredText
from graph_ingest.domain.model import FrozenModel


class StaleRelationPolicy(StrEnum):
    KEEP = "KEEP"
    DELETE_IF_UNREFERENCED = "DELETE_IF_UNREFERENCED"


class RequestKind(StrEnum):
    INGEST = "INGEST"
    RETRACT = "RETRACT"


class IngestOptions(FrozenModel):
    stale_relation_policy: StaleRelationPolicy = StaleRelationPolicy.DELETE_IF_UNREFERENCED
    re_extract_unchanged: bool = False
    fail_on_extraction_error: bool = False
    allow_partial_reconciliation: bool = True


class IngestRequest(FrozenModel):
    """One document version to plan (``kind`` INGEST) or one document to retract (RETRACT).

    ``content`` is the text itself; a producer holding large documents elsewhere sends
    ``content_ref`` (a URI the planner can read) with ``content_hash`` instead."""

    kind: RequestKind = RequestKind.INGEST
    space: Identifier
    document_id: StoredId
    document_version: NonEmptyText
    source_updated_at: datetime | None = None
    schema_version: NonEmptyText
    content: StoredText | None = None
    content_ref: StoredText | None = None
    content_hash: StoredId | None = None
    operation_id: StoredId | None = None
    batch_id: StoredId | None = None
    options: IngestOptions = IngestOptions()
    candidates: Extraction | None = None

    @model_validator(mode="after")
    def check_content(self) -> IngestRequest:
        if self.kind is RequestKind.RETRACT:
            return self
        if self.content is None and self.content_ref is None:
            raise ValueError("an INGEST request needs content or content_ref")
        if self.content is not None and self.content_ref is not None:
            raise ValueError("send content or content_ref, not both")
        if self.content_ref is not None and self.content_hash is None:
            raise ValueError("content_ref needs content_hash")
        return self

    @property
    def key(self) -> str:
        """The Kafka key of the request's message (``ids.document_key``)."""
        return document_key(self.space, self.document_id)
