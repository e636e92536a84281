"""Split a document into chunks: paragraph and sentence aware, bounded, with exact offsets.

Offsets are Python string indices (code points) into the whole text, and ``text[start:end]`` is
always the chunk's text. Paragraphs (separated by blank lines) are packed together while the
chunk stays within ``max_chars``; a longer paragraph is split between sentences, and a sentence
longer than that between words (or, with no space to cut at, anywhere). Leading and trailing
whitespace never starts or ends a chunk.

Chunk ids are stable: derived from the document id, the chunk's place (its start offset) and the
hash of its text, so the same text at the same place in the same document always gets the same id,
and an edit elsewhere in the document does not change it unless it moves it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

from graph_ingest.domain.candidates import Chunk
from graph_ingest.domain.fingerprint import canonical_json
from graph_ingest.domain.ids import content_hash

# A blank line (possibly holding spaces) separates paragraphs.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# A sentence ends at . ! ? or an ellipsis followed by a space (closing quotes and brackets stay
# with it), or right after the CJK full stop, exclamation and question marks, which need none.
_SENTENCE_END = re.compile(
    r"(?:[.!?\u2026]+[\"')\]]*\s+)|(?:[\u3002\uff01\uff1f]+[\u300d\u300f\uff09]*\s*)"
)
_SPACE = re.compile(r"\s+")

Span = tuple[int, int]


def chunk_document(document_id: str, text: str, *, max_chars: int) -> tuple[Chunk, ...]:
    """The chunks of ``text`` in document order; none for an empty or blank document."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, not {max_chars}")
    return tuple(
        Chunk(
            chunk_id=chunk_id_of(document_id, start, text[start:end]),
            start=start,
            end=end,
            text=text[start:end],
        )
        for start, end in _packed(_units(text, max_chars), max_chars)
    )


def chunk_id_of(document_id: str, start: int, chunk_text: str) -> str:
    material = canonical_json([document_id, start, content_hash(chunk_text)])
    return "chk_" + hashlib.sha256(material).hexdigest()[:32]


def _units(text: str, max_chars: int) -> Iterator[Span]:
    """Spans of at most ``max_chars``, none of them crossing a paragraph boundary unless the
    paragraph itself had to be cut."""
    for start, end in _split(text, 0, len(text), _PARAGRAPH_BREAK):
        if end - start <= max_chars:
            yield start, end
            continue
        for s_start, s_end in _split(text, start, end, _SENTENCE_END):
            if s_end - s_start <= max_chars:
                yield s_start, s_end
            else:
                yield from _cut(text, s_start, s_end, max_chars)


def _split(text: str, start: int, end: int, separator: re.Pattern[str]) -> Iterator[Span]:
    """The stripped, non-empty pieces of ``text[start:end]`` between matches of ``separator``
    (a separator's trailing whitespace stays out; its punctuation stays with the piece)."""
    position = start
    for match in separator.finditer(text, start, end):
        cut = match.start() + len(match.group().rstrip())
        yield from _stripped(text, position, cut)
        position = match.end()
    yield from _stripped(text, position, end)


def _stripped(text: str, start: int, end: int) -> Iterator[Span]:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    trail = len(piece) - len(piece.rstrip())
    if start + lead < end - trail:
        yield start + lead, end - trail


def _cut(text: str, start: int, end: int, max_chars: int) -> Iterator[Span]:
    """Cut a span longer than ``max_chars`` at the last whitespace that keeps each piece within
    the bound (anywhere, if a piece has none)."""
    while end - start > max_chars:
        limit = start + max_chars
        spaces = [m.start() for m in _SPACE.finditer(text, start + 1, limit + 1)]
        cut = spaces[-1] if spaces else limit
        yield from _stripped(text, start, cut)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    yield from _stripped(text, start, end)


def _packed(units: Iterator[Span], max_chars: int) -> Iterator[Span]:
    """Join consecutive units while the joined span (the text between them included) fits."""
    current: Span | None = None
    for start, end in units:
        if current is not None and end - current[0] <= max_chars:
            current = (current[0], end)
            continue
        if current is not None:
            yield current
        current = (start, end)
    if current is not None:
        yield current


__all__ = ["chunk_document", "chunk_id_of"]
