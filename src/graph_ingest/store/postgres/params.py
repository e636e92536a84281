"""Python values to statement parameters: one array per column, for ``unnest``.

Every batch statement of the store is set-based: parallel arrays in, one statement out, whatever
the batch size. These helpers build the arrays; each concern's module maps its own records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from graph_ingest.domain.limits import storable_text

Row = Mapping[str, Any]
Columns = dict[str, list[Any]]
DocumentKey = tuple[str, str]


def key_columns(names: Sequence[str], keys: Sequence[tuple[Any, ...]]) -> Columns:
    """Key tuples as one array parameter per column (for ``unnest``), named ``names`` in order."""
    return {name: [key[index] for key in keys] for index, name in enumerate(names)}


def json_text(value: Any) -> str:
    """Compact JSON text for a JSONB parameter (orjson: about 20 of these per plan)."""
    return orjson.dumps(value).decode("utf-8")


def storable_or_none(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


def columns(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Columns:
    """Transpose rows into one list per column: the arrays ``unnest`` turns back into rows."""
    return {name: [row[name] for row in rows] for name in names}
