"""The Neo4j adapter: one managed write transaction per database per batch; driver errors translated.

Graph writes are at-least-once and idempotent (``MERGE`` on ``node_id`` and on edge identity,
``SET +=`` for properties, deletes of absent elements are no-ops), so re-applying a batch after any
failure, including an unknown commit outcome, converges to the same graph.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import neo4j
from neo4j import exceptions as neo4j_errors

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph import cypher
from graph_ingest.graph.cypher import Statement, StatementKind
from graph_ingest.graph.errors import GraphError, GraphPreconditionFailed
from graph_ingest.graph.neo4j_errors import translated
from graph_ingest.settings.neo4j import Neo4jSettings

logger = logging.getLogger(__name__)

_MAX_NAMED = 5
# Rows per UNWIND statement. Measured on the small-plan workload: 5,000 against 1,000 writes a
# batch of 200 plans in 2 statements instead of 4, and the pipeline ran 4-15 % faster in 4 of 5
# paired runs (the benchmark's ceiling finds 5,000 the fastest of 1,000 / 5,000 / 10,000 too).
ROWS_PER_STATEMENT = 5000

T = TypeVar("T")


class Rows(list[Any]):
    """A statement's rows (or ids) as a query parameter, whose repr is their count.

    The driver formats every RUN's parameters for its debug log before the logger checks the
    level (neo4j 6.4, ``Bolt5x5.run``): the repr of every row of every batch, ~2.7 µs per
    element, a twelfth of the apply thread. Both of its packers write a list subclass as a list.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


def _run(tx: neo4j.ManagedTransaction, query: str, **parameters: Any) -> neo4j.Result:
    """``tx.run`` with every list parameter passed as :class:`Rows`."""
    return tx.run(
        query,
        {name: Rows(value) if type(value) is list else value for name, value in parameters.items()},
    )


class Neo4jGraphWriter:
    """``GraphWriter`` on Neo4j. Not thread-safe: one writer per applier loop.

    ``max_retry_time_s`` bounds the driver's own retries of transient failures inside ``apply``
    (deadlocks, a dropped connection); kept short because retry tiers and the circuit breaker
    own the longer waits.
    """

    def __init__(
        self,
        settings: Neo4jSettings,
        *,
        rows_per_statement: int = ROWS_PER_STATEMENT,
        max_retry_time_s: float = 5.0,
    ) -> None:
        if rows_per_statement < 1:
            raise ConfigurationError(
                f"rows_per_statement must be at least 1, not {rows_per_statement}"
            )
        self._settings = settings
        self._rows_per_statement = rows_per_statement
        self._max_retry_time_s = max_retry_time_s
        self._driver: neo4j.Driver | None = None
        self._constrained: set[tuple[str, str]] = set()
        self._write = neo4j.unit_of_work(timeout=settings.transaction_timeout_s)(_write_statements)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._driver is not None:
            return
        try:
            driver = neo4j.GraphDatabase.driver(
                self._settings.uri,
                auth=self._settings.auth(),
                max_connection_pool_size=self._settings.max_connection_pool_size,
                connection_timeout=self._settings.connection_timeout_s,
                max_transaction_retry_time=self._max_retry_time_s,
                user_agent="graph-ingest",
            )
        except (ValueError, neo4j_errors.ConfigurationError) as exc:
            raise ConfigurationError(
                f"neo4j: cannot build a driver for {self._settings.uri!r}: {exc}"
            ) from exc
        try:
            with translated(f"connect to {self._settings.uri}"):
                driver.verify_connectivity()
        except BaseException:
            driver.close()
            raise
        self._driver = driver
        logger.info("neo4j: connected to %s", self._settings.uri)

    def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()

    def __enter__(self) -> Neo4jGraphWriter:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writes ------------------------------------------------------------------------------

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        """Write the whole batch: one managed write transaction per database, all or nothing.

        Constraints for new base labels are created first, outside the data transaction. A batch
        spanning several databases is atomic per database only; re-applying it converges.
        """
        by_database = cypher.build_statements(batch, rows_per_statement=self._rows_per_statement)
        if not by_database:
            return
        driver = self._require_driver()
        for options in dict.fromkeys(
            options for options, mutation in batch if not mutation.is_empty
        ):
            self.ensure_constraints(options)
        for database, statements in by_database.items():
            with (
                translated(f"apply to database {database}"),
                driver.session(database=database) as session,
            ):
                session.execute_write(self._write, statements)
            logger.debug(
                "neo4j: applied %d plan(s) to %s in %d statement(s)",
                len(batch),
                database,
                len(statements),
            )

    def ensure_constraints(self, options: GraphOptions) -> None:
        """Create the uniqueness constraint on ``node_id`` for the base label, once per writer."""
        key = (options.database, options.node_label)
        if key in self._constrained:
            return
        query = cypher.constraint_query(options.node_label)
        driver = self._require_driver()
        with (
            translated(f"create constraint on {options.database}:{options.node_label}"),
            driver.session(database=options.database) as session,
        ):
            session.run(query).consume()
        self._constrained.add(key)

    def probe(self) -> None:
        """A trivial write transaction on the default database: does Neo4j take writes at all?

        Tells a sick or unreachable database apart from a batch that fails on its own content.
        It merges one node labelled ``GraphIngestProbe`` (kept, so the probe stays a no-op).
        An explicit transaction, not a managed one: the driver's own retries would hold a probe
        started during an outage for seconds after Neo4j is back, and the breaker that asked
        wants the answer now (it probes again next interval)."""
        driver = self._require_driver()
        with (
            translated("probe"),
            driver.session(database=self._settings.database) as session,
            session.begin_transaction() as tx,
        ):
            _probe(tx)
            tx.commit()

    # -- reads -------------------------------------------------------------------------------

    def count_elements(self, options: GraphOptions) -> tuple[int, int]:
        """(nodes with the base label, relationships between two such nodes)."""
        queries = (
            cypher.count_nodes_query(options.node_label),
            cypher.count_relationships_query(options.node_label),
        )

        def count(tx: neo4j.ManagedTransaction) -> tuple[int, int]:
            nodes, relationships = (int(tx.run(q).single(strict=True)["c"]) for q in queries)
            return nodes, relationships

        action = f"count elements in {options.database}:{options.node_label}"
        return self._managed(options.database, action, count)

    def named_elements(
        self, options: GraphOptions, node_ids: Sequence[str]
    ) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
        """What a person reads of the part of the graph ``node_ids`` span: (type, name) of each
        node the graph holds, (source name, type, target name) of each relationship between
        two of them; sorted, one read transaction."""
        ids = sorted(set(node_ids))
        node_query = cypher.named_nodes_query(options.node_label)
        relationship_query = cypher.named_relationships_query(options.node_label)

        def read(
            tx: neo4j.ManagedTransaction,
        ) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
            nodes = [
                ("/".join(r["types"]), str(r["name"]))
                for r in _run(tx, node_query, ids=ids, base=options.node_label)
            ]
            relationships = [
                (str(r["src"]), str(r["type"]), str(r["dst"]))
                for r in _run(tx, relationship_query, ids=ids)
            ]
            return nodes, relationships

        action = f"read names in {options.database}:{options.node_label}"
        return self._managed(options.database, action, read)

    def find_elements(
        self, options: GraphOptions, node_ids: Sequence[str], edge_keys: Sequence[EdgeKey]
    ) -> tuple[set[str], set[EdgeKey]]:
        """Which of ``node_ids`` and ``edge_keys`` the graph holds: one read transaction, in
        statements of at most ``rows_per_statement`` rows; ids travel as parameters."""
        nodes = sorted(set(node_ids))
        edges = sorted(set(edge_keys), key=EdgeKey.sort_key)
        if not nodes and not edges:
            return set(), set()
        size = self._rows_per_statement
        node_query = cypher.existing_nodes_query(options.node_label)
        edge_query = cypher.existing_edges_query(options.node_label)
        edge_rows = [{"src": k.src, "type": k.type, "dst": k.dst, "rank": k.rank} for k in edges]

        def read(tx: neo4j.ManagedTransaction) -> tuple[set[str], set[EdgeKey]]:
            found_nodes: set[str] = set()
            found_edges: set[EdgeKey] = set()
            for start in range(0, len(nodes), size):
                result = _run(tx, node_query, rows=nodes[start : start + size])
                found_nodes.update(str(record["id"]) for record in result)
            for start in range(0, len(edge_rows), size):
                result = _run(tx, edge_query, rows=edge_rows[start : start + size])
                found_edges.update(EdgeKey(**record.data()) for record in result)
            return found_nodes, found_edges

        action = f"read elements in {options.database}:{options.node_label}"
        return self._managed(options.database, action, read)

    def edges_touching(self, options: GraphOptions, node_ids: Sequence[str]) -> set[EdgeKey]:
        """Every edge of the graph with an end among ``node_ids`` (one read transaction)."""
        nodes = sorted(set(node_ids))
        if not nodes:
            return set()
        size = self._rows_per_statement
        query = cypher.touching_edges_query(options.node_label)

        def read(tx: neo4j.ManagedTransaction) -> set[EdgeKey]:
            found: set[EdgeKey] = set()
            for start in range(0, len(nodes), size):
                result = _run(tx, query, rows=nodes[start : start + size])
                found.update(
                    EdgeKey(**record.data()) for record in result if record["rank"] is not None
                )
            return found

        action = f"read edges around nodes in {options.database}:{options.node_label}"
        return self._managed(options.database, action, read)

    def node_ids_after(self, options: GraphOptions, after: str, limit: int) -> list[str]:
        """The next ``limit`` node ids of the base label after ``after``, in id order."""
        query = cypher.node_ids_page_query(options.node_label)

        def read(tx: neo4j.ManagedTransaction) -> list[str]:
            return [str(record["id"]) for record in tx.run(query, after=after, limit=limit)]

        action = f"list nodes of {options.database}:{options.node_label}"
        return self._managed(options.database, action, read)

    def _managed(
        self,
        database: str,
        action: str,
        work: Callable[[neo4j.ManagedTransaction], T],
        *,
        write: bool = False,
    ) -> T:
        """Run ``work`` in one managed transaction on ``database``, driver errors translated."""
        driver = self._require_driver()
        with translated(action), driver.session(database=database) as session:
            if write:
                return session.execute_write(work)
            return session.execute_read(work)

    def _require_driver(self) -> neo4j.Driver:
        if self._driver is None:
            raise GraphError(
                "Neo4jGraphWriter used before start()", code=StatusCode.FAILED_PRECONDITION
            )
        return self._driver


def _write_statements(tx: neo4j.ManagedTransaction, statements: list[Statement]) -> None:
    """The transaction function: run every statement, check the preconditions, raise to roll back."""
    for statement in statements:
        if statement.kind is StatementKind.NODE_DELETE and statement.check is not None:
            linked = _offenders(tx, statement)
            if linked:
                raise GraphPreconditionFailed(
                    "cannot delete nodes that still have relationships (detach_deleted_nodes is "
                    f"false); e.g. {linked}; nothing of the batch was written"
                )
        result = _run(tx, statement.query, rows=statement.rows)
        if statement.kind is not StatementKind.EDGE_UPSERT:
            result.consume()
            continue
        merged = int(result.single(strict=True)["merged"])
        if merged < len(statement.rows):
            missing = _offenders(tx, statement)
            raise GraphPreconditionFailed(
                f"{len(statement.rows) - merged} edge upsert(s) name a node that does not exist; "
                f"e.g. {missing}; nothing of the batch was written"
            )


def _probe(tx: neo4j.Transaction) -> None:
    tx.run("MERGE (p:GraphIngestProbe {id: 'probe'}) SET p.at = timestamp()").consume()


def _offenders(tx: neo4j.ManagedTransaction, statement: Statement) -> list[str]:
    assert statement.check is not None
    return [str(record["what"]) for record in _run(tx, statement.check, rows=statement.rows)][
        :_MAX_NAMED
    ]
