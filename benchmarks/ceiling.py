"""The ceiling: a workload's nodes and edges written with the driver alone, the fast way.

The pipeline's own layout (one base label with its ``node_id`` uniqueness constraint in place,
``MERGE`` on ``node_id`` and on (type, rank) between two matched nodes, ``SET … +=`` for
properties; edge deletes, then node upserts, then edge upserts), in as few write transactions as
Neo4j takes well. Several layouts (rows per ``UNWIND`` statement, rows per transaction) are tried
after a warm-up pass, each best of several, on at most ``SAMPLE_ELEMENTS`` elements; the fastest
is then timed on the whole workload if it is larger. The best time is the ceiling: everything
else is divided by it, so it must not be weak. The driver's Rust extension (a dependency) is used
whenever it is installed; the report says whether it was.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cpu import NEO4J, CpuGroups, CpuWindow, stack_pids
from isolation import driver, wipe_label
from neo4j import Driver, ManagedTransaction
from results import CEILING, Run
from workloads import Workload

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.graph import cypher
from graph_ingest.settings import Settings

SAMPLE_ELEMENTS = 40_000
# (rows per statement, rows per transaction); 100,000 rows is one transaction for a sample and
# keeps a big workload's transactions well inside the local Neo4j's 1 GiB heap.
LAYOUTS = ((1000, 100_000), (5000, 100_000), (10_000, 100_000), (1000, 5000))
QUICK_LAYOUTS = LAYOUTS[:1]
# Warm-up passes go on while each is more than 10 % faster than the one before, up to the maximum.
MAX_WARM_UP_PASSES = 5
WARM_WITHIN = 0.9

Statement = tuple[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class Layout:
    rows_per_statement: int
    rows_per_transaction: int


def rust_extension() -> str | None:
    """The version of ``neo4j-rust-ext`` if it is installed (the driver then uses it)."""
    try:
        return importlib.metadata.version("neo4j-rust-ext")
    except importlib.metadata.PackageNotFoundError:
        return None


def statements(label: str, plans: Sequence[IngestionPlan]) -> Iterator[Statement]:
    """Every row of ``plans``, as they give them (nothing merged), in the pipeline's order."""
    base = cypher.quote(label, what="label")
    node, rank = cypher.NODE_ID_PROPERTY, cypher.EDGE_RANK_PROPERTY
    by_type: dict[str, list[dict[str, Any]]] = {}
    for p in plans:
        for k in p.mutation.edge_deletes:
            by_type.setdefault(k.type, []).append({"src": k.src, "dst": k.dst, "rank": k.rank})
    for edge_type, rows in by_type.items():
        yield cypher.edge_delete_query(label, edge_type), rows
    nodes = [
        {"id": n.node_id, "props": n.properties} for p in plans for n in p.mutation.node_upserts
    ]
    if nodes:
        yield cypher.node_upsert_query(label, ()), nodes
    by_type = {}
    for p in plans:
        for e in p.mutation.edge_upserts:
            by_type.setdefault(e.type, []).append(
                {"src": e.src, "dst": e.dst, "rank": e.rank, "props": e.properties}
            )
    for edge_type, rows in by_type.items():
        rel = cypher.quote(edge_type, what="edge type")
        query = (
            f"{cypher.KEEP_PLAN}UNWIND $rows AS row MATCH (a:{base} {{{node}: row.src}}) "
            f"MATCH (b:{base} {{{node}: row.dst}}) "
            f"MERGE (a)-[r:{rel} {{{rank}: row.rank}}]->(b) SET r += row.props"
        )
        yield query, rows


def transactions(
    label: str, plans: Sequence[IngestionPlan], layout: Layout
) -> list[list[Statement]]:
    """The statements of ``plans`` in chunks of ``rows_per_statement`` rows, grouped in order
    into transactions of at most ``rows_per_transaction`` rows (a statement is never split)."""
    out: list[list[Statement]] = [[]]
    rows_in_last = 0
    for query, rows in statements(label, plans):
        for start in range(0, len(rows), layout.rows_per_statement):
            chunk = rows[start : start + layout.rows_per_statement]
            if out[-1] and rows_in_last + len(chunk) > layout.rows_per_transaction:
                out.append([])
                rows_in_last = 0
            out[-1].append((query, chunk))
            rows_in_last += len(chunk)
    return [t for t in out if t]


def _run(tx: ManagedTransaction, work: list[Statement]) -> None:
    for query, rows in work:
        tx.run(query, rows=rows).consume()


def write(d: Driver, database: str, work: Iterable[list[Statement]]) -> float:
    """Seconds to run each transaction of ``work`` as one managed write transaction."""
    started = time.perf_counter()
    with d.session(database=database) as session:
        for statements_of_tx in work:
            session.execute_write(_run, statements_of_tx)
    return time.perf_counter() - started


def best_pass(
    settings: Settings, d: Driver, workload: Workload, layout: Layout, repeats: int
) -> tuple[float, dict[str, float], dict[str, float]]:
    """The best of ``repeats`` timed passes: its seconds, the CPU seconds this client and Neo4j
    spent on it, and of it Neo4j's JIT compilers'. Each pass starts from an empty label with the
    workload's setup (not timed) written."""
    label, database = workload.graph.node_label, workload.graph.database
    setup = transactions(label, workload.setup, layout)
    measured = transactions(label, workload.plans, layout)
    window = CpuWindow(CpuGroups(stack_pids(settings, [NEO4J]), client=True))
    passes = []
    for _ in range(repeats):
        write(d, database, setup)
        window.start()
        seconds = write(d, database, measured)
        passes.append((seconds, window.stop(), window.jit_spent))
        wipe_label(settings, label)
    return min(passes, key=lambda p: p[0])


def best_time(
    settings: Settings, d: Driver, workload: Workload, layout: Layout, repeats: int
) -> float:
    return best_pass(settings, d, workload, layout, repeats)[0]


def warm_up(settings: Settings, d: Driver, sample: Workload, layout: Layout, passes: int) -> None:
    """Write ``sample`` until a pass is no longer clearly faster than the one before (at most
    ``passes``): Neo4j is several times slower cold, and one pass did not always warm it (the
    small ceiling measured 22,000 elements/s just after the stack started, 41,000 twenty
    minutes later, with one warm-up pass each)."""
    previous = best_time(settings, d, sample, layout, 1)
    for _ in range(passes - 1):
        seconds = best_time(settings, d, sample, layout, 1)
        if seconds > previous * WARM_WITHIN:
            return
        previous = seconds


def _sample_size(workload: Workload) -> int:
    per_plan = max(1, workload.elements // max(1, len(workload.plans)))
    return max(1, SAMPLE_ELEMENTS // per_plan)


def ceiling(settings: Settings, workload: Workload, *, quick: bool = False) -> Run:
    """The ceiling of ``workload``: its label must exist empty, its constraint in place."""
    layouts = [Layout(*t) for t in (QUICK_LAYOUTS if quick else LAYOUTS)]
    repeats = 1 if quick else 3
    sample = workload.prefix(_sample_size(workload))
    with driver(settings) as d:
        warm_up(settings, d, sample, layouts[0], passes=1 if quick else MAX_WARM_UP_PASSES)
        tried = {layout: best_time(settings, d, sample, layout, repeats) for layout in layouts}
        fastest = min(tried, key=lambda layout: tried[layout])
        # the whole workload's best pass, timed and counted (the sample's when it is whole)
        seconds, cpu, jit = best_pass(settings, d, workload, fastest, repeats)
    return Run.of(
        workload,
        CEILING,
        seconds,
        cpu_s=cpu,
        jit_s=jit,
        details={
            "layout": {
                "rows_per_statement": fastest.rows_per_statement,
                "rows_per_transaction": fastest.rows_per_transaction,
            },
            "layouts_tried": {
                f"{layout.rows_per_statement}/{layout.rows_per_transaction}": sample.elements / t
                for layout, t in tried.items()
            },
            "sample_plans": len(sample.plans),
            "neo4j_rust_ext": rust_extension(),
        },
    )
