"""The read service of documents (``<schema>_read.documents``): one document's view, as a typed
value (``projections.document_fold.DocumentView``) the CLI's ``doc show`` and the API return."""

from __future__ import annotations

from psycopg import sql

from graph_ingest.projections.document_fold import DocumentView
from graph_ingest.projections.document_table import DOCUMENT_COLUMNS, DOCUMENTS, view_from_row
from graph_ingest.projections.tables import ReadTables


class DocumentQueries:
    """Answers from the documents of one read schema (``ReadTables``, started)."""

    def __init__(self, tables: ReadTables) -> None:
        self._tables = tables
        self._query = sql.SQL(
            "SELECT {} FROM {} WHERE space = %(space)s AND document_id = %(document_id)s"
        ).format(
            sql.SQL(", ").join(sql.Identifier(c) for c in DOCUMENT_COLUMNS),
            sql.Identifier(tables.schema, DOCUMENTS),
        )

    def document_view(self, space: str, document_id: str) -> DocumentView | None:
        """The document's revision and operations; None when no operation of it was seen."""
        rows = self._tables.fetch(self._query, {"space": space, "document_id": document_id})
        return view_from_row(rows[0]) if rows else None


__all__ = ["DocumentQueries"]
