"""Deterministic identifiers: never random, never time-based."""

import hashlib

from graph_ingest.domain.fingerprint import canonical_json


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def derive_operation_id(
    space: str,
    document_id: str,
    expected_revision: int,
    content_hash: str,
    extraction_fingerprint: str,
    base_operation_id: str | None = None,
) -> str:
    """Identify one ingestion intent. The expected revision keeps A->B->A reverts distinct; the
    base operation keeps apart two plans of one content onto different states of one revision
    (a replan after another lineage committed). A new document has no base: its id is as before."""
    parts: list[str | int] = [
        space,
        document_id,
        expected_revision,
        content_hash,
        extraction_fingerprint,
    ]
    if base_operation_id is not None:
        parts.append(base_operation_id)
    material = canonical_json(parts)
    return "op_" + hashlib.sha256(material).hexdigest()[:32]


def document_key(space: str, document_id: str) -> str:
    """The Kafka key of every message about a document (its ingest requests, plans and their
    retry-tier copies): ``space/document_id``, so all of them share a partition, in order. The
    only builder of that key; ``dlq.entries`` reads it back."""
    return f"{space}/{document_id}"
