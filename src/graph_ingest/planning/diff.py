"""The version diff: a request against the document's previous state, as pure functions.

* **Order.** A request whose source update time is older than the state's, or whose document
  version compares lower (both numbers, or both ``v<number>``, dotted parts allowed), is out of
  order: FAILED_PRECONDITION, it is never planned on top of a newer version.
* **Unchanged.** The same content hash, document version, schema version and extraction
  fingerprint as the state: nothing to extract again.
* **Stale edges.** Those the previous state listed and the new one does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from graph_ingest.domain.fingerprint import fingerprint_of
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError

_NUMBERED = re.compile(r"v?(\d+(?:\.\d+)*)", re.IGNORECASE)


def extraction_fingerprint(
    *,
    extractor: str,
    identity: Mapping[str, Any],
    schema_version: str,
    content_hash: str,
    planner: Mapping[str, Any],
) -> str:
    """What decides the candidates a document gets, computable without extracting: the extractor
    and its identity, the schema version, the content, and the planner settings that shape the
    result (``planner``: chunk size, confidence threshold)."""
    return fingerprint_of(
        {
            "extractor": extractor,
            "identity": dict(identity),
            "schema_version": schema_version,
            "content_hash": content_hash,
            "planner": dict(planner),
        }
    )


def check_order(
    previous: DocumentState | None, document_version: str, source_updated_at: datetime | None
) -> None:
    if previous is None:
        return
    where = f"document {previous.space}/{previous.document_id}"
    if (
        source_updated_at is not None
        and previous.source_updated_at is not None
        and source_updated_at < previous.source_updated_at
    ):
        raise PlanningError(
            f"{where}: out of order: the request's source_updated_at "
            f"{source_updated_at.isoformat()} is older than {previous.source_updated_at.isoformat()}"
            f" of revision {previous.revision} (version {previous.document_version!r})",
            code=StatusCode.FAILED_PRECONDITION,
        )
    new, old = _version_number(document_version), _version_number(previous.document_version)
    if new is not None and old is not None and new < old:
        raise PlanningError(
            f"{where}: out of order: document version {document_version!r} is older than "
            f"{previous.document_version!r} of revision {previous.revision}",
            code=StatusCode.FAILED_PRECONDITION,
        )


def _version_number(version: str) -> tuple[int, ...] | None:
    match = _NUMBERED.fullmatch(version.strip())
    return None if match is None else tuple(int(part) for part in match.group(1).split("."))


def is_unchanged(
    previous: DocumentState | None,
    *,
    content_hash: str,
    document_version: str,
    schema_version: str,
    extraction_fingerprint: str,
) -> bool:
    return previous is not None and (
        previous.content_hash,
        previous.document_version,
        previous.schema_version,
        previous.extraction_fingerprint,
    ) == (content_hash, document_version, schema_version, extraction_fingerprint)


def stale_edges(previous: DocumentState | None, current: Iterable[EdgeKey]) -> tuple[EdgeKey, ...]:
    """The previous state's edges (listed or kept) the current one no longer lists, in edge
    order."""
    if previous is None:
        return ()
    listed = set(current)
    return tuple(
        sorted(
            (k for k in (*previous.edge_keys, *previous.kept_edge_keys) if k not in listed),
            key=EdgeKey.sort_key,
        )
    )


def stale_nodes(previous: DocumentState | None, current: Iterable[str]) -> tuple[str, ...]:
    """The previous state's node ids the current one no longer lists, sorted."""
    if previous is None:
        return ()
    return tuple(sorted(set(previous.node_ids).difference(current)))


__all__ = ["check_order", "extraction_fingerprint", "is_unchanged", "stale_edges", "stale_nodes"]
