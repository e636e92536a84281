"""CPU cost of the applier's decode path, step by step, with no services (issue 20).

    python benchmarks/decode_cost.py [--small N] [--large N] [--repeat R]

Encodes ``small`` (10 nodes + 10 edges) and ``large`` (1,000 + 1,000) plans as the planner does
(``workloads.py``, ``plan_message``), then times each step of what the applier does to every
message it fetches, in this process's CPU time (``time.process_time``), best of ``--repeat``:

* ``avro read``: the single-object header and the Avro body (``codec.read_single_object``);
* ``validation``: the decoded record into an ``IngestionPlan`` (``model_validate``);
* ``fingerprint``: the plan's fingerprint recomputed and compared (``verify_fingerprint``);
* ``verified_plan``: the three together, as the consumer calls them;
* ``decode_message``: the whole decoder on a Kafka message with the planner's headers (built
  in memory: ``confluent_kafka.Message``), what the ``decode-ahead`` thread runs;
* ``decode_message, batch kept``: the same, each plan kept until a batch's worth
  (``applier.batch_max_plans``) is decoded, as the applier holds a batch until it is applied:
  the objects survive into the collector's scans and new memory, as in a worker.

Every step runs under the workers' garbage-collector thresholds (``GRAPH_INGEST_GC__*``).

Prints µs per plan, and per element (node or edge upserted or deleted) for the large plans.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message
from workloads import build

from graph_ingest.cli.gc_policy import tune_collector
from graph_ingest.consumers.plan_message import decode_message, verified_plan
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from graph_ingest.kafka.consumer import read_retry
from graph_ingest.kafka.headers import headers_of
from graph_ingest.schemas.codec import read_single_object
from graph_ingest.schemas.registry import PLAN
from graph_ingest.settings.applier import ApplierSettings
from graph_ingest.settings.gc import GcSettings

TOPIC = "ingestion.plans"
MAX_PLAN_BYTES = 64 * 1024 * 1024


Steps = dict[str, tuple[Callable[[Any], object], Sequence[Any]]]
"""Named steps, each a function and the items it is timed over."""


def cpu_per_item(step: Callable[[Any], object], items: Sequence[Any], repeat: int) -> float:
    """Seconds of CPU per item of ``step``, the best of ``repeat`` passes over ``items``."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        for item in items:
            step(item)
        best = min(best, time.process_time() - start)
    return best / len(items)


def kafka_messages(kind: str, count: int) -> tuple[list[bytes], list[Message], int]:
    """Encoded plan values, the same as Kafka messages, and the elements of one plan."""
    workload = build(kind, count, GraphOptions(node_label="DecodeCost"))
    outbox = workload.messages(workload.plans, TOPIC)
    messages = [
        Message(
            topic=TOPIC,
            partition=0,
            offset=offset,
            key=m.key,
            value=m.value,
            headers=[(name, value.encode("utf-8")) for name, value in m.headers.items()],
            timestamp=(TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + offset),
        )
        for offset, m in enumerate(outbox)
    ]
    return [m.value for m in outbox], messages, workload.plans[0].mutation.element_count


def decode_whole(message: Message) -> object:
    headers = headers_of(message)
    decoded = decode_message(message, headers, read_retry(headers), max_plan_bytes=MAX_PLAN_BYTES)
    if decoded.plan is None:
        raise RuntimeError(f"benchmark message does not decode: {decoded.error}")
    return decoded


class KeptForABatch:
    """``decode_whole``, each result kept until ``batch`` of them are decoded, then all let go."""

    def __init__(self, batch: int) -> None:
        self._batch = batch
        self._kept: list[object] = []

    def __call__(self, message: Message) -> object:
        self._kept.append(decoded := decode_whole(message))
        if len(self._kept) >= self._batch:
            self._kept = []
        return decoded


def measure(kind: str, count: int, repeat: int) -> dict[str, float]:
    values, messages, elements = kafka_messages(kind, count)
    records = [read_single_object(v, PLAN) for v in values]
    plans = [IngestionPlan.model_validate(r) for r in records]
    steps: Steps = {
        "avro read": (lambda v: read_single_object(v, PLAN), values),
        "validation": (IngestionPlan.model_validate, records),
        "fingerprint": (IngestionPlan.verify_fingerprint, plans),
        "verified_plan": (verified_plan, values),
        "decode_message": (decode_whole, messages),
        "decode_message, batch kept": (
            KeptForABatch(ApplierSettings().batch_max_plans),
            messages,
        ),
    }
    return step_costs(steps, repeat, elements)


def step_costs(steps: Steps, repeat: int, elements: int) -> dict[str, float]:
    """Seconds of CPU per plan of each step (in order), and the elements of one plan."""
    costs = {name: cpu_per_item(step, items, repeat) for name, (step, items) in steps.items()}
    costs["elements"] = elements
    return costs


def report(
    description: str | None, measure: Callable[[str, int, int], dict[str, float]], small: int
) -> None:
    """Parse ``--small``, ``--large`` and ``--repeat``, measure both workloads and print µs per
    plan of each step (and per element for the large plans)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--small", type=int, default=small, help="small plans (10 + 10)")
    parser.add_argument("--large", type=int, default=5, help="large plans (1,000 + 1,000)")
    parser.add_argument("--repeat", type=int, default=5, help="passes; the best is kept")
    args = parser.parse_args()
    tune_collector(GcSettings())
    small_costs = measure("small", args.small, args.repeat)
    large_costs = measure("large", args.large, args.repeat)
    names = [name for name in small_costs if name != "elements"]
    width = max(map(len, names)) + 2
    print(f"{'step':<{width}}{'small µs/plan':>15}{'large µs/plan':>15}{'large µs/el':>13}")
    for name in names:
        print(
            f"{name:<{width}}{small_costs[name] * 1e6:>15.1f}{large_costs[name] * 1e6:>15.1f}"
            f"{large_costs[name] * 1e6 / large_costs['elements']:>13.2f}"
        )


def main() -> None:
    report(__doc__, measure, small=500)


if __name__ == "__main__":
    main()
