"""Chunking: bounded, paragraph and sentence aware, exact offsets, stable ids."""

from __future__ import annotations

import itertools

import pytest

from graph_ingest.domain.candidates import Chunk
from graph_ingest.planning.chunking import chunk_document

pytestmark = pytest.mark.timeout(30)

PARAGRAPHS = (
    "Alice Chen leads the Payments team. She owns the Ledger service.\n"
    "\n"
    "Bob Stone works on Project Atlas.   \n"
    "  \n"
    "\n"
    "The Ledger service depends on the Billing API!"
)


def assert_exact(text: str, chunks: tuple[Chunk, ...], max_chars: int) -> None:
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert 0 < len(chunk.text) <= max_chars
        assert chunk.text == chunk.text.strip()
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in itertools.pairwise(chunks))


def test_small_paragraphs_are_packed_into_one_chunk() -> None:
    chunks = chunk_document("doc", PARAGRAPHS, max_chars=1000)

    assert len(chunks) == 1
    assert chunks[0].text == PARAGRAPHS.strip()
    assert_exact(PARAGRAPHS, chunks, 1000)


def test_paragraphs_that_do_not_fit_together_become_separate_chunks() -> None:
    chunks = chunk_document("doc", PARAGRAPHS, max_chars=70)

    assert [c.text for c in chunks] == [
        "Alice Chen leads the Payments team. She owns the Ledger service.",
        "Bob Stone works on Project Atlas.",
        "The Ledger service depends on the Billing API!",
    ]
    assert_exact(PARAGRAPHS, chunks, 70)


def test_a_long_paragraph_is_split_between_sentences() -> None:
    chunks = chunk_document("doc", PARAGRAPHS, max_chars=40)

    assert [c.text for c in chunks] == [
        "Alice Chen leads the Payments team.",
        "She owns the Ledger service.",
        "Bob Stone works on Project Atlas.",
        "The Ledger service depends on the",
        "Billing API!",
    ]
    assert_exact(PARAGRAPHS, chunks, 40)


def test_chinese_sentences_split_after_their_full_stop_without_spaces() -> None:
    text = "张三负责支付系统升级项目。李四是支付团队的成员。王五维护账本服务\uff01"  # full-width !

    chunks = chunk_document("文档", text, max_chars=14)

    assert [c.text for c in chunks] == [
        "张三负责支付系统升级项目。",
        "李四是支付团队的成员。",
        "王五维护账本服务\uff01",
    ]
    assert_exact(text, chunks, 14)


def test_a_word_longer_than_the_bound_is_cut_anywhere() -> None:
    text = "x" * 25 + " tail"

    chunks = chunk_document("doc", text, max_chars=10)

    assert [c.text for c in chunks] == ["x" * 10, "x" * 10, "xxxxx tail"]
    assert_exact(text, chunks, 10)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_an_empty_or_blank_document_has_no_chunks(text: str) -> None:
    assert chunk_document("doc", text, max_chars=100) == ()


def test_chunk_ids_are_stable_and_depend_on_document_place_and_text() -> None:
    first = chunk_document("doc", PARAGRAPHS, max_chars=70)
    again = chunk_document("doc", PARAGRAPHS, max_chars=70)
    other_doc = chunk_document("doc-2", PARAGRAPHS, max_chars=70)
    # an edit in the last paragraph leaves the others' ids alone
    edited = chunk_document("doc", PARAGRAPHS.replace("Billing API", "Billing api"), max_chars=70)
    # moving the same text changes its place, so its id
    shifted = chunk_document("doc", "Intro.\n\n" + PARAGRAPHS, max_chars=70)

    ids = [c.chunk_id for c in first]
    assert ids == [c.chunk_id for c in again]
    assert len(set(ids)) == 3
    assert not set(ids) & {c.chunk_id for c in other_doc}
    assert [c.chunk_id for c in edited][:2] == ids[:2]
    assert edited[2].chunk_id != ids[2]
    assert not set(ids) & {c.chunk_id for c in shifted}


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document("doc", "text", max_chars=0)
