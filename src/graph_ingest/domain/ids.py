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
) -> str:
    """Identify one ingestion intent. The expected revision keeps A->B->A reverts distinct."""
    material = canonical_json(
        [space, document_id, expected_revision, content_hash, extraction_fingerprint]
    )
    return "op_" + hashlib.sha256(material).hexdigest()[:32]


def plan_key(space: str, document_id: str) -> str:
    """Kafka key of every plan message: all plans of one document share a partition."""
    return f"{space}/{document_id}"
