"""Batch selection cost: time per ``select_batch`` call over a full pending list, and how many
batches it takes to drain it, for plans that share no node and for plans that share nodes.

    python benchmarks/select_batch.py [--plans 1000] [--batch 200] [--repeat 20] [--large 60]

Pure Python, no services. Plans are the small ones of workloads.py (10 nodes + 10 edges each); in
the "shared" scenario every node id is drawn from a pool of 2,000, so plans of different documents
upsert and link the same nodes, as entity plans of one space do; "revised" is "shared" with every
plan arriving twice in a row (a second version of each document), so plans keep being deferred.
"revised" and ``--large`` plans of 1,000 + 1,000 (four to a batch by the default lock bound) are
then drained three ways, side by side: walking every deferred plan again at each batch; with the
footprints kept from one batch to the next; and, as the applier does, kept and folded into the
deferred plans' union only when a later plan is checked against it (the first two fold each
deferred footprint at once, as the selection did before).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

from workloads import large_plans, small_plans

from graph_ingest.consumers import batching
from graph_ingest.consumers.batching import Footprints, select_batch
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.mutation import EdgeUpsert, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.settings.applier import ApplierSettings

POOL = 2000
DEFAULT_LOCKS = ApplierSettings().batch_max_locks


def shared(plan: IngestionPlan, index: int) -> IngestionPlan:
    """The plan with its node ids mapped into the shared pool (distinct within the plan)."""
    pool_id = {
        n.node_id: f"bench:pool:{(index + i * 101) % POOL}"
        for i, n in enumerate(plan.mutation.node_upserts)
    }
    mutation = Mutation(
        node_upserts=tuple(
            NodeUpsert(node_id=pool_id[n.node_id], labels=n.labels, properties=n.properties)
            for n in plan.mutation.node_upserts
        ),
        edge_upserts=tuple(
            EdgeUpsert(src=pool_id[e.src], type=e.type, dst=pool_id[e.dst], properties=e.properties)
            for e in plan.mutation.edge_upserts
        ),
    )
    return plan.model_copy(update={"mutation": mutation})


def messages(plans: list[IngestionPlan]) -> list[PlanMessage]:
    return [
        PlanMessage("plans", 0, offset, plan.key.encode(), encode_plan(plan), plan=plan)
        for offset, plan in enumerate(plans)
    ]


def measure(name: str, pending: list[PlanMessage], batch: int, repeat: int) -> None:
    started = time.perf_counter()
    for _ in range(repeat):
        select_batch(pending, batch, 8 * 1024 * 1024)
    per_call_ms = (time.perf_counter() - started) / repeat * 1000
    sizes = []
    left = pending
    while left:
        chosen, left = select_batch(left, batch, 8 * 1024 * 1024)
        sizes.append(len(chosen))
    print(
        f"{name:9s} {len(pending)} pending: {per_call_ms:6.2f} ms per call; "
        f"drained in {len(sizes)} batches, first sizes {sizes[:6]}"
    )


def drain_s(pending: list[PlanMessage], batch: int, max_locks: int, keep: bool) -> float:
    """Seconds to select every batch of ``pending``, as the applier does, keeping the deferred
    plans' footprints from one call to the next (``keep``) or walking them again."""
    footprints: Footprints | None = {} if keep else None
    started = time.perf_counter()
    left = pending
    while left:
        _, left = select_batch(left, batch, 8 * 1024 * 1024, max_locks, footprints)
    return time.perf_counter() - started


@contextlib.contextmanager
def folding_at_once() -> Iterator[None]:
    """Selection as it was before the deferred footprints were folded on demand: each folded
    into the deferred plans' union as soon as its plan is deferred."""
    add = batching._Deferred.add

    def add_and_fold(self: batching._Deferred, plan: batching._Footprint) -> None:
        add(self, plan)
        self._fold()

    batching._Deferred.add = add_and_fold  # type: ignore[method-assign]
    try:
        yield
    finally:
        batching._Deferred.add = add  # type: ignore[method-assign]


def compare_drains(name: str, pending: list[PlanMessage], batch: int, max_locks: int) -> None:
    """Draining three ways, alternately, three times each: walking every deferred plan again and
    folding its footprint at once; keeping the footprints, folding at once; keeping them and
    folding on demand (the applier today)."""
    ways: dict[str, list[float]] = {"walked": [], "kept": [], "on demand": []}
    for _ in range(3):
        with folding_at_once():
            ways["walked"].append(drain_s(pending, batch, max_locks, keep=False))
            ways["kept"].append(drain_s(pending, batch, max_locks, keep=True))
        ways["on demand"].append(drain_s(pending, batch, max_locks, keep=True))
    walked, kept, on_demand = (min(times) for times in ways.values())
    print(
        f"{name:9s} {len(pending)} pending, drained: {walked * 1000:7.1f} ms walking every "
        f"deferred plan again, {kept * 1000:7.1f} ms keeping their footprints "
        f"({walked / kept:.1f}x), {on_demand * 1000:7.1f} ms folding them on demand "
        f"({kept / on_demand:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--large", type=int, default=60, help="large plans (1,000 + 1,000)")
    args = parser.parse_args()
    plans = small_plans(args.plans, GraphOptions(node_label="Bench"))
    measure("disjoint", messages(plans), args.batch, args.repeat)
    shared_plans = [shared(p, i) for i, p in enumerate(plans)]
    measure("shared", messages(shared_plans), args.batch, args.repeat)
    revised = [p for p in shared_plans[: args.plans // 2] for _ in range(2)]
    measure("revised", messages(revised), args.batch, args.repeat)
    compare_drains("revised", messages(revised), args.batch, DEFAULT_LOCKS)
    large = large_plans(args.large, GraphOptions(node_label="Bench"))
    compare_drains("large", messages(large), args.batch, DEFAULT_LOCKS)


if __name__ == "__main__":
    main()
