"""A request's document text and its hash: inline content is hashed (and checked against a given
hash), a ``content_ref`` is read (``file://`` by default) and must match the hash it came with.

Kept apart from the planner because reading is the one step of planning that touches the outside
(a file, or whatever reader a caller plugs in), and its failures carry their own status codes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast
from urllib.parse import urlparse
from urllib.request import url2pathname

from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import PlanningError

ContentReader = Callable[[str], str]


def read_file_uri(ref: str) -> str:
    """The default content reader: ``file://`` URIs, UTF-8."""
    parsed = urlparse(ref)
    if parsed.scheme != "file":
        raise PlanningError(
            f"content_ref {ref!r}: only file:// references can be read",
            code=StatusCode.FAILED_PRECONDITION,
        )
    path = Path(url2pathname(parsed.path))
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise PlanningError(
            f"content_ref {ref!r}: cannot read: {error.strerror}", code=StatusCode.UNAVAILABLE
        ) from None
    except UnicodeDecodeError:
        raise PlanningError(f"content_ref {ref!r}: not UTF-8 text") from None


def request_content_hash(request: IngestRequest) -> str:
    """The hash of the request's content: computed from inline content (which must match a given
    hash), else the hash a ``content_ref`` came with."""
    if request.content is None:
        return cast(str, request.content_hash)  # a content_ref comes with its hash (the model)
    actual = content_hash(request.content)
    if request.content_hash is not None and request.content_hash != actual:
        raise PlanningError(
            f"document {request.key}: content_hash {request.content_hash!r} is not the hash of "
            f"the content ({actual})"
        )
    return actual


def request_content(request: IngestRequest, digest: str, read: ContentReader) -> str:
    """The request's text: inline, or read from its ``content_ref`` and checked against ``digest``."""
    if request.content is not None:
        return request.content
    text = read(str(request.content_ref))
    if content_hash(text) != digest:
        raise PlanningError(
            f"document {request.key}: the content at content_ref does not match content_hash"
        )
    return text


__all__ = ["ContentReader", "read_file_uri", "request_content", "request_content_hash"]
