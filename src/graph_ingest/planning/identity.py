"""What names a plan before anything is extracted: its base (the previous state's revision and
operation), its content hash and extraction fingerprint, its operation id and its provenance.

The operation id is derived from these alone, so planning the same request on the same state
again names the same operation; the NO_OP check compares them with the previous state. Both an
ingestion and a retraction are named here, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph_ingest.domain.ids import derive_operation_id
from graph_ingest.domain.plan import Provenance
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.state import DocumentState
from graph_ingest.planning.content import request_content_hash
from graph_ingest.planning.diff import extraction_fingerprint
from graph_ingest.planning.extractor import Extractor
from graph_ingest.settings.planner import PlannerSettings

RETRACTION_FINGERPRINT = "retraction"
"""The extraction fingerprint of a retraction: it extracts nothing."""


@dataclass(frozen=True, slots=True)
class PlanIdentity:
    expected_revision: int
    base_operation_id: str | None
    operation_id: str
    content_hash: str
    extraction_fingerprint: str
    provenance: Provenance

    @classmethod
    def of(
        cls,
        request: IngestRequest,
        previous: DocumentState | None,
        *,
        content_hash: str,
        fingerprint: str,
        provenance: Provenance,
    ) -> PlanIdentity:
        """Planned on ``previous`` (None: a new document); the request's own operation id wins."""
        expected = previous.revision if previous is not None else 0
        base = previous.operation_id if previous is not None else None
        operation_id = request.operation_id or derive_operation_id(
            request.space, request.document_id, expected, content_hash, fingerprint, base
        )
        return cls(expected, base, operation_id, content_hash, fingerprint, provenance)


def ingestion_identity(
    request: IngestRequest,
    previous: DocumentState | None,
    extractor: Extractor,
    schema_version: str,
    settings: PlannerSettings,
) -> PlanIdentity:
    """The fingerprint covers what decides the candidates: the extractor and its identity, the
    schema, the content, and the planner settings that shape the result."""
    identity = extractor.identity()
    digest = request_content_hash(request)
    fingerprint = extraction_fingerprint(
        extractor=extractor.name,
        identity=identity,
        schema_version=schema_version,
        content_hash=digest,
        planner={
            "chunk_max_chars": settings.chunk_max_chars,
            "min_confidence": settings.min_confidence,
        },
    )
    provenance = Provenance(
        extractor=extractor.name,
        model=_optional_text(identity.get("model")),
        prompt_version=_optional_text(identity.get("prompt_version")),
    )
    return PlanIdentity.of(
        request, previous, content_hash=digest, fingerprint=fingerprint, provenance=provenance
    )


def retraction_identity(request: IngestRequest, previous: DocumentState) -> PlanIdentity:
    """A retraction keeps the previous content hash and extracts nothing."""
    return PlanIdentity.of(
        request,
        previous,
        content_hash=previous.content_hash,
        fingerprint=RETRACTION_FINGERPRINT,
        provenance=Provenance(extractor="retraction"),
    )


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


__all__ = ["RETRACTION_FINGERPRINT", "PlanIdentity", "ingestion_identity", "retraction_identity"]
