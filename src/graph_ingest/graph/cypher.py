"""Pure Cypher building: a batch of mutations becomes a few ``UNWIND`` statements per database.

Labels and relationship types cannot be query parameters, so they are written into the query text;
each one goes through ``validate_identifier`` here (whatever the models checked before) and is
quoted with backticks. Everything else (node ids, ranks, property maps) travels as parameters;
property names are keys of a parameter map and never appear in query text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from graph_ingest.domain.identifiers import validate_identifier
from graph_ingest.domain.mutation import Mutation
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.graph.errors import GraphInvalidArgument

NODE_ID_PROPERTY = "node_id"
EDGE_RANK_PROPERTY = "rank"

Row = dict[str, Any]


class StatementKind(StrEnum):
    """In apply order."""

    EDGE_DELETE = "EDGE_DELETE"
    NODE_DELETE = "NODE_DELETE"
    NODE_UPSERT = "NODE_UPSERT"
    EDGE_UPSERT = "EDGE_UPSERT"


@dataclass(frozen=True, slots=True)
class Statement:
    """One parameterised query over ``$rows``.

    ``check`` is a query over the same ``$rows`` that returns offending rows (column ``what``):
    for a non-detaching node delete, the nodes that still have relationships (run first); for an
    edge upsert, the edges whose endpoints are missing (run when fewer edges than rows were merged).
    """

    kind: StatementKind
    query: str
    rows: list[Any]
    check: str | None = None


def quote(name: str, *, what: str) -> str:
    """Validate ``name`` as an identifier and return it backtick-quoted."""
    return f"`{validate_identifier(name, what=what)}`"


def _labels(names: Sequence[str]) -> str:
    return "".join(":" + quote(name, what="label") for name in names)


def constraint_query(base_label: str) -> str:
    label = quote(base_label, what="label")
    name = quote(f"{base_label}_{NODE_ID_PROPERTY}", what="constraint name")
    return (
        f"CREATE CONSTRAINT {name} IF NOT EXISTS "
        f"FOR (n:{label}) REQUIRE n.{NODE_ID_PROPERTY} IS UNIQUE"
    )


def node_upsert_query(base_label: str, extra_labels: Sequence[str]) -> str:
    base = quote(base_label, what="label")
    set_labels = f" SET n{_labels(extra_labels)}" if extra_labels else ""
    return (
        f"UNWIND $rows AS row MERGE (n:{base} {{{NODE_ID_PROPERTY}: row.id}}) "
        f"SET n += row.props{set_labels}"
    )


def edge_upsert_query(base_label: str, edge_type: str) -> str:
    base = quote(base_label, what="label")
    rel = quote(edge_type, what="edge type")
    return (
        f"UNWIND $rows AS row "
        f"MATCH (a:{base} {{{NODE_ID_PROPERTY}: row.src}}) "
        f"MATCH (b:{base} {{{NODE_ID_PROPERTY}: row.dst}}) "
        f"MERGE (a)-[r:{rel} {{{EDGE_RANK_PROPERTY}: row.rank}}]->(b) "
        f"SET r += row.props RETURN count(r) AS merged"
    )


def missing_endpoints_query(base_label: str, edge_type: str) -> str:
    base = quote(base_label, what="label")
    rel = validate_identifier(edge_type, what="edge type")  # safe inside a '...' literal too
    return (
        f"UNWIND $rows AS row WITH row "
        f"WHERE NOT EXISTS {{ MATCH (:{base} {{{NODE_ID_PROPERTY}: row.src}}) }} "
        f"OR NOT EXISTS {{ MATCH (:{base} {{{NODE_ID_PROPERTY}: row.dst}}) }} "
        f"RETURN '(' + row.src + ')-[:{rel}#' + toString(row.rank) + ']->(' + row.dst + ')'"
        f" AS what LIMIT 5"
    )


def edge_delete_query(base_label: str, edge_type: str) -> str:
    base = quote(base_label, what="label")
    rel = quote(edge_type, what="edge type")
    return (
        f"UNWIND $rows AS row "
        f"MATCH (a:{base} {{{NODE_ID_PROPERTY}: row.src}})"
        f"-[r:{rel} {{{EDGE_RANK_PROPERTY}: row.rank}}]->"
        f"(b:{base} {{{NODE_ID_PROPERTY}: row.dst}}) DELETE r"
    )


def node_delete_query(base_label: str, *, detach: bool) -> str:
    base = quote(base_label, what="label")
    delete = "DETACH DELETE" if detach else "DELETE"
    return f"UNWIND $rows AS id MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}}) {delete} n"


def linked_nodes_query(base_label: str) -> str:
    base = quote(base_label, what="label")
    return (
        f"UNWIND $rows AS id MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}}) "
        f"WHERE EXISTS {{ (n)--() }} RETURN n.{NODE_ID_PROPERTY} AS what LIMIT 5"
    )


def count_nodes_query(base_label: str) -> str:
    return f"MATCH (n:{quote(base_label, what='label')}) RETURN count(n) AS c"


def count_relationships_query(base_label: str) -> str:
    base = quote(base_label, what="label")
    return f"MATCH (:{base})-[r]->(:{base}) RETURN count(r) AS c"


@dataclass(slots=True)
class _Groups:
    """One database's rows, grouped by what shares a query text; dicts keep first-seen order."""

    edge_deletes: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    node_deletes: dict[tuple[str, bool], list[str]] = field(default_factory=dict)
    node_upserts: dict[tuple[str, tuple[str, ...]], list[Row]] = field(default_factory=dict)
    edge_upserts: dict[tuple[str, str], list[Row]] = field(default_factory=dict)

    def add(self, options: GraphOptions, mutation: Mutation) -> None:
        base = options.node_label
        for key in mutation.edge_deletes:
            self.edge_deletes.setdefault((base, key.type), []).append(
                {"src": key.src, "dst": key.dst, "rank": key.rank}
            )
        if mutation.node_deletes:
            self.node_deletes.setdefault((base, mutation.detach_deleted_nodes), []).extend(
                mutation.node_deletes
            )
        for node in mutation.node_upserts:
            if NODE_ID_PROPERTY in node.properties:
                raise GraphInvalidArgument(
                    f"node {node.node_id!r}: property {NODE_ID_PROPERTY!r} is reserved for the id"
                )
            extra = tuple(sorted(set(node.labels) - {base}))
            self.node_upserts.setdefault((base, extra), []).append(
                {"id": node.node_id, "props": node.properties}
            )
        for edge in mutation.edge_upserts:
            if EDGE_RANK_PROPERTY in edge.properties:
                raise GraphInvalidArgument(
                    f"edge {edge.key}: property {EDGE_RANK_PROPERTY!r} is reserved for the rank"
                )
            self.edge_upserts.setdefault((base, edge.type), []).append(
                {"src": edge.src, "dst": edge.dst, "rank": edge.rank, "props": edge.properties}
            )

    def statements(self, rows_per_statement: int) -> Iterator[Statement]:
        for (base, edge_type), rows in self.edge_deletes.items():
            query = edge_delete_query(base, edge_type)
            for chunk in _chunks(sorted(rows, key=_edge_identity), rows_per_statement):
                yield Statement(StatementKind.EDGE_DELETE, query, chunk)
        for (base, detach), ids in self.node_deletes.items():
            query = node_delete_query(base, detach=detach)
            check = None if detach else linked_nodes_query(base)
            for chunk in _chunks(sorted(ids), rows_per_statement):
                yield Statement(StatementKind.NODE_DELETE, query, chunk, check)
        for (base, extra), rows in self.node_upserts.items():
            query = node_upsert_query(base, extra)
            for chunk in _chunks(sorted(rows, key=_node_identity), rows_per_statement):
                yield Statement(StatementKind.NODE_UPSERT, query, chunk)
        for (base, edge_type), rows in self.edge_upserts.items():
            query = edge_upsert_query(base, edge_type)
            check = missing_endpoints_query(base, edge_type)
            for chunk in _chunks(sorted(rows, key=_edge_identity), rows_per_statement):
                yield Statement(StatementKind.EDGE_UPSERT, query, chunk, check)


def _node_identity(row: Row) -> str:
    return str(row["id"])


def _edge_identity(row: Row) -> tuple[str, str, int]:
    return (row["src"], row["dst"], row["rank"])


def _chunks(rows: list[Any], size: int) -> Iterator[list[Any]]:
    if len(rows) <= size:
        yield rows
        return
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def build_statements(
    batch: Sequence[tuple[GraphOptions, Mutation]], *, rows_per_statement: int
) -> dict[str, list[Statement]]:
    """Group a whole batch, in one pass, into ordered statements per database.

    Order per database: edge deletes, node deletes, node upserts, edge upserts (for the whole
    batch). Within a group, rows are sorted by identity, so concurrent writers take locks in the
    same order (fewer deadlocks); the sort is stable, so where two plans of the batch upsert the
    same identity the later plan's properties win. Databases with nothing to write are left out.
    """
    if rows_per_statement < 1:
        raise ValueError(f"rows_per_statement must be at least 1, not {rows_per_statement}")
    groups: dict[str, _Groups] = {}
    for options, mutation in batch:
        if mutation.is_empty:
            continue
        validate_identifier(options.database, what="database")
        groups.setdefault(options.database, _Groups()).add(options, mutation)
    return {
        database: list(database_groups.statements(rows_per_statement))
        for database, database_groups in groups.items()
    }
