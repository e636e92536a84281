"""Pure Cypher building: a batch of mutations becomes a few ``UNWIND`` statements per database.

Labels and relationship types cannot be query parameters, so they are written into the query text;
each one goes through ``validate_identifier`` here (whatever the models checked before) and is
quoted with backticks. Everything else (node ids, ranks, property maps) travels as parameters;
property names are keys of a parameter map and never appear in query text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import Any

from graph_ingest.domain.identifiers import validate_identifier
from graph_ingest.domain.mutation import Mutation, PropertyValue
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.graph.errors import GraphInvalidArgument

NODE_ID_PROPERTY = "node_id"
EDGE_RANK_PROPERTY = "rank"

Row = dict[str, Any]

# The write statements keep the plan they were first given. Neo4j plans them again whenever the
# label's counts have moved by more than 75 % (at most every 10 s), which costs the write that
# meets it 50-250 ms; every plan of these statements seeks the unique node_id index whatever
# the counts (the edges by both ends: ``_between_ends``), so a new one gains nothing
# (docs/performance.md, third round).
KEEP_PLAN = "CYPHER replan=skip "


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
        f"{KEEP_PLAN}UNWIND $rows AS row MERGE (n:{base} {{{NODE_ID_PROPERTY}: row.id}}) "
        f"SET n += row.props{set_labels}"
    )


def edge_upsert_query(base_label: str, edge_type: str) -> str:
    base = quote(base_label, what="label")
    rel = quote(edge_type, what="edge type")
    return (
        f"{KEEP_PLAN}UNWIND $rows AS row "
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


def _between_ends(base: str, subquery: str) -> str:
    """``subquery`` run on the nodes ``a`` and ``b`` whose unique ids are ``row.src`` and
    ``row.dst`` (it looks only between them; a row whose ends are not both there yields nothing).

    Written as one pattern, the planner may seek one end and walk all of its relationships for
    each row (a hub's thousands), or join each row against a scan of the label's index when the
    index's statistics are fresh; replan=skip keeps whichever it chose (1,000 edge deletes took
    3.6-4.9 s in about half of the runs, against 20 ms). Here it seeks each end and can only
    expand into, walking the end with fewer relationships (docs/performance.md, seventh round)."""
    return (
        f"MATCH (a:{base} {{{NODE_ID_PROPERTY}: row.src}}) "
        f"MATCH (b:{base} {{{NODE_ID_PROPERTY}: row.dst}}) "
        f"CALL (a, b, row) {{ {subquery} }}"
    )


def edge_delete_query(base_label: str, edge_type: str) -> str:
    base = quote(base_label, what="label")
    rel = quote(edge_type, what="edge type")
    return f"{KEEP_PLAN}UNWIND $rows AS row " + _between_ends(
        base, f"MATCH (a)-[r:{rel} {{{EDGE_RANK_PROPERTY}: row.rank}}]->(b) DELETE r"
    )


def node_delete_query(base_label: str, *, detach: bool) -> str:
    base = quote(base_label, what="label")
    delete = "DETACH DELETE" if detach else "DELETE"
    return f"{KEEP_PLAN}UNWIND $rows AS id MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}}) {delete} n"


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


def named_nodes_query(base_label: str) -> str:
    """The nodes of ``$ids`` the graph holds: their labels besides the base one, their name."""
    base = quote(base_label, what="label")
    return (
        f"UNWIND $ids AS id MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}}) "
        f"RETURN [l IN labels(n) WHERE l <> $base] AS types, n.name AS name ORDER BY types, name"
    )


def named_relationships_query(base_label: str) -> str:
    """The relationships between two nodes of ``$ids``, by the names of their ends."""
    base = quote(base_label, what="label")
    return (
        f"MATCH (a:{base})-[r]->(b:{base}) "
        f"WHERE a.{NODE_ID_PROPERTY} IN $ids AND b.{NODE_ID_PROPERTY} IN $ids "
        f"RETURN a.name AS src, type(r) AS type, b.name AS dst ORDER BY src, type, dst"
    )


def existing_nodes_query(base_label: str) -> str:
    """Which of the node ids in ``$rows`` the graph holds (column ``id``)."""
    base = quote(base_label, what="label")
    return (
        f"UNWIND $rows AS id MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}}) RETURN DISTINCT id AS id"
    )


def existing_edges_query(base_label: str) -> str:
    """Which of the edge keys in ``$rows`` (src, type, dst, rank) the graph holds.

    The type is compared as a value, so one query serves every edge type."""
    base = quote(base_label, what="label")
    return (
        "UNWIND $rows AS row "
        + _between_ends(
            base,
            f"MATCH (a)-[r]->(b) WHERE type(r) = row.type AND r.{EDGE_RANK_PROPERTY} = row.rank "
            "RETURN r",
        )
        + " RETURN DISTINCT row.src AS src, row.type AS type, row.dst AS dst, row.rank AS rank"
    )


def touching_edges_query(base_label: str) -> str:
    """Every relationship between two base-label nodes with an end among the ids in ``$rows``
    (src, type, dst, rank): what the graph holds around a document's nodes."""
    base = quote(base_label, what="label")
    return (
        f"UNWIND $rows AS id "
        f"MATCH (n:{base} {{{NODE_ID_PROPERTY}: id}})-[r]-(:{base}) "
        f"WITH DISTINCT r "
        f"RETURN startNode(r).{NODE_ID_PROPERTY} AS src, type(r) AS type, "
        f"endNode(r).{NODE_ID_PROPERTY} AS dst, r.{EDGE_RANK_PROPERTY} AS rank"
    )


def node_ids_page_query(base_label: str) -> str:
    """The next ``$limit`` node ids of the base label after ``$after``, in id order (keyset
    pagination on the unique id's index)."""
    base = quote(base_label, what="label")
    return (
        f"MATCH (n:{base}) WHERE n.{NODE_ID_PROPERTY} > $after "
        f"RETURN n.{NODE_ID_PROPERTY} AS id ORDER BY id LIMIT $limit"
    )


Labels = tuple[str, ...] | frozenset[str]
Properties = Mapping[str, PropertyValue]


@dataclass(slots=True)
class _Groups:
    """One database's changes, in batch order; dicts keep first-seen order.

    Upserts are merged per identity (labels add up, properties update in batch order, a later
    None still removes the property), so one row per node or edge carries what applying the
    plans one by one would leave, whichever label group it lands in. Node deletes are kept in
    runs per base label: consecutive plans with the same ``detach`` share a run, a change of it
    starts the next one.

    An element seen once (the common case) keeps its plan's own labels and property map, read
    only; a merge makes new ones, so a plan is never changed.
    """

    edge_deletes: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    node_deletes: dict[str, list[tuple[bool, list[str]]]] = field(default_factory=dict)
    nodes: dict[str, dict[str, tuple[Labels, Properties]]] = field(default_factory=dict)
    """Per base label: node id -> (labels, properties)."""
    edges: dict[tuple[str, str], dict[tuple[str, str, int], Properties]] = field(
        default_factory=dict
    )
    """Per (base label, edge type): (src, dst, rank) -> properties."""

    def add(self, options: GraphOptions, mutation: Mutation) -> None:
        base = options.node_label
        for key in mutation.edge_deletes:
            self.edge_deletes.setdefault((base, key.type), []).append(
                {"src": key.src, "dst": key.dst, "rank": key.rank}
            )
        if mutation.node_deletes:
            runs = self.node_deletes.setdefault(base, [])
            if not runs or runs[-1][0] is not mutation.detach_deleted_nodes:
                runs.append((mutation.detach_deleted_nodes, []))
            runs[-1][1].extend(mutation.node_deletes)
        if mutation.node_upserts:
            self._add_nodes(base, mutation)
        if mutation.edge_upserts:
            self._add_edges(base, mutation)

    def _add_nodes(self, base: str, mutation: Mutation) -> None:
        nodes = self.nodes.setdefault(base, {})
        for node in mutation.node_upserts:
            properties = node.properties
            if NODE_ID_PROPERTY in properties:
                raise GraphInvalidArgument(
                    f"node {node.node_id!r}: property {NODE_ID_PROPERTY!r} is reserved for the id"
                )
            seen = nodes.get(node.node_id)
            if seen is None:
                nodes[node.node_id] = (node.labels, properties)
            else:
                nodes[node.node_id] = (
                    frozenset((*seen[0], *node.labels)),
                    {**seen[1], **properties},
                )

    def _add_edges(self, base: str, mutation: Mutation) -> None:
        groups = self.edges
        for edge in mutation.edge_upserts:
            properties = edge.properties
            if EDGE_RANK_PROPERTY in properties:
                raise GraphInvalidArgument(
                    f"edge {edge.key}: property {EDGE_RANK_PROPERTY!r} is reserved for the rank"
                )
            edges = groups.get((base, edge.type))
            if edges is None:
                edges = groups[(base, edge.type)] = {}
            identity = (edge.src, edge.dst, edge.rank)
            seen = edges.get(identity)
            edges[identity] = properties if seen is None else {**seen, **properties}

    def statements(self, rows_per_statement: int) -> Iterator[Statement]:
        for (base, edge_type), rows in self.edge_deletes.items():
            query = edge_delete_query(base, edge_type)
            for chunk in _chunks(sorted(rows, key=_EDGE_IDENTITY), rows_per_statement):
                yield Statement(StatementKind.EDGE_DELETE, query, chunk)
        for base, runs in self.node_deletes.items():
            for detach, ids in runs:
                query = node_delete_query(base, detach=detach)
                check = None if detach else linked_nodes_query(base)
                for chunk in _chunks(sorted(ids), rows_per_statement):
                    yield Statement(StatementKind.NODE_DELETE, query, chunk, check)
        for (base, extra), rows in self._node_rows().items():
            query = node_upsert_query(base, extra)
            for chunk in _chunks(rows, rows_per_statement):
                yield Statement(StatementKind.NODE_UPSERT, query, chunk)
        for (base, edge_type), edges in self.edges.items():
            query = edge_upsert_query(base, edge_type)
            check = missing_endpoints_query(base, edge_type)
            rows = [  # sorted by identity: keys are unique, so no two properties are compared
                {"src": src, "dst": dst, "rank": rank, "props": props}
                for (src, dst, rank), props in sorted(edges.items())
            ]
            for chunk in _chunks(rows, rows_per_statement):
                yield Statement(StatementKind.EDGE_UPSERT, query, chunk, check)

    def _node_rows(self) -> dict[tuple[str, tuple[str, ...]], list[Row]]:
        """Merged node rows grouped by what shares a query text (base and sorted extra labels),
        in first-seen order of the groups; rows sorted by node id."""
        groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for base, nodes in self.nodes.items():
            for node_id, (labels, _) in nodes.items():
                extra = tuple(sorted(set(labels) - {base})) if labels else ()
                groups.setdefault((base, extra), []).append(node_id)
        return {
            (base, extra): [{"id": i, "props": self.nodes[base][i][1]} for i in sorted(ids)]
            for (base, extra), ids in groups.items()
        }


_EDGE_IDENTITY = itemgetter("src", "dst", "rank")


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

    Order per database: edge deletes, node deletes (in runs that keep batch order), node upserts,
    edge upserts (for the whole batch). Upserts of one node or edge are merged in batch order
    first, so the later plan wins, always. Within a group, rows are sorted by identity, so
    concurrent writers take locks in the same order (fewer deadlocks). Databases with nothing to
    write are left out.

    The endpoint rule: an edge upsert succeeds only if both its endpoints exist once the batch's
    node upserts are in, that is, exist in the graph or are upserted by a plan of the batch. That
    equals "in the graph before the plan, or upserted by the plan itself or by an earlier plan"
    (the rule applying plans one by one gives) because ``select_batch`` keeps a plan that upserts
    a node out of a batch in which an earlier plan names that node as an endpoint only. Likewise
    deletes run before upserts for the whole batch because it never holds a delete together with
    another plan's touch of the same element.
    """
    if rows_per_statement < 1:
        raise ValueError(f"rows_per_statement must be at least 1, not {rows_per_statement}")
    groups: dict[str, _Groups] = {}
    for options, mutation in batch:
        if mutation.is_empty:
            continue
        database = groups.get(options.database)
        if database is None:
            validate_identifier(options.database, what="database")
            database = groups[options.database] = _Groups()
        database.add(options, mutation)
    return {
        database: list(database_groups.statements(rows_per_statement))
        for database, database_groups in groups.items()
    }
