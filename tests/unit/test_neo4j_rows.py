"""Statement rows as a query parameter (``graph.neo4j.Rows``): written to Bolt exactly as a list,
by the driver's Rust packer and by its Python one, and shown in the driver's debug log by their
count, not their content."""

from __future__ import annotations

import io
from typing import Any

import pytest
from neo4j._codec.hydration import DehydrationHooks
from neo4j._codec.packstream.v1 import Packer

from graph_ingest.graph.neo4j import Rows

ROWS: list[Any] = [
    {"node_id": "doc-1/n-0", "labels": ["Person"], "props": {"name": "Ada", "born": 1815}},
    {"node_id": "doc-1/n-1", "labels": [], "props": {"tags": ["a", "b"], "score": 0.5}},
    {"node_id": "ünïcode \x00 and a NUL", "labels": [], "props": {}},
]


def _hooks() -> DehydrationHooks:
    # What the driver's Packer.pack injects: tuples are written as lists.
    return DehydrationHooks(exact_values={}, exact_types={tuple: list}, subtypes={})


def _packed(value: object, *, python: bool) -> bytes:
    stream = io.BytesIO()
    packer = Packer(stream)  # type: ignore[no-untyped-call]  # the driver's internals are untyped
    if python:
        packer._py_pack(value, _hooks())  # type: ignore[no-untyped-call]
    else:
        packer.pack(value)  # type: ignore[no-untyped-call]
    return stream.getvalue()


@pytest.mark.parametrize("python", [False, True], ids=["default packer", "python packer"])
def test_rows_are_written_as_the_list_they_hold(python: bool) -> None:
    fields = ("UNWIND $rows AS row RETURN row", {"rows": Rows(ROWS)}, {"db": "neo4j"})
    plain = ("UNWIND $rows AS row RETURN row", {"rows": list(ROWS)}, {"db": "neo4j"})
    assert _packed(fields, python=python) == _packed(plain, python=python)


def test_rows_show_their_count_not_their_content() -> None:
    rows = Rows([{"text": "secret document text " * 1000}] * 1000)
    shown = repr(rows)
    assert shown == "<1000 rows>"
    assert "secret" not in " ".join(map(repr, ("query", {"rows": rows}, {})))


def test_rows_are_still_a_list() -> None:
    rows = Rows(ROWS)
    assert rows == ROWS
    assert isinstance(rows, list)
