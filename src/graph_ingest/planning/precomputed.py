"""The ``precomputed`` extractor: the candidates a producer sent with its request.

Their evidence must point into the planner's chunks of the document (``chunking.chunk_document``
with the planner's ``chunk_max_chars``); validation checks every quote there like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ingest.domain.candidates import Chunk, Extraction
from graph_ingest.domain.fingerprint import fingerprint_of
from graph_ingest.planning.graph_schema import GraphSchema


class PrecomputedExtractor:
    name = "precomputed"

    def __init__(self, candidates: Extraction) -> None:
        self._candidates = candidates

    def identity(self) -> dict[str, Any]:
        """The candidates themselves decide the output: their canonical hash."""
        return {"candidates": fingerprint_of(self._candidates.model_dump(mode="json"))}

    def extract(self, chunks: Sequence[Chunk], schema: GraphSchema) -> Extraction:
        return self._candidates


__all__ = ["PrecomputedExtractor"]
