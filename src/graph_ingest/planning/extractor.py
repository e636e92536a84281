"""The extractor protocol: chunks and a graph schema in, candidates out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from graph_ingest.domain.candidates import Chunk, Extraction
from graph_ingest.planning.graph_schema import GraphSchema


class Extractor(Protocol):
    name: str
    """Short name recorded in plan provenance ("llm", "rules", "precomputed")."""

    def identity(self) -> dict[str, Any]:
        """What, besides the document and the schema, decides this extractor's output (model id,
        prompt version, rule set hash...). It becomes part of the extraction fingerprint, so a
        change here re-extracts an otherwise unchanged document. JSON-serialisable."""
        ...

    def extract(self, chunks: Sequence[Chunk], schema: GraphSchema) -> Extraction:
        """Candidates for the whole document. Raise ExtractionFailed (transient code for a
        retryable cause) when nothing usable came back; record partial problems as issues."""
        ...
