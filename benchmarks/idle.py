"""The idle cost: CPU per second of a started pipeline with nothing to do.

One planner, one applier (its relay beside it, polling every retry tier) and one projector run on
a run's own topics and schema; once each has joined its group and settled, the CPU each worker
and each service of the stack spends over ``seconds`` of silence is read from /proc (``cpu.py``).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpu import CpuGroups, CpuWindow, stack_pids
from isolation import isolated
from pipeline_run import wait_for_group, worker_processes

from graph_ingest.settings import Settings

DEMO_GRAPH_SCHEMA = Path(__file__).resolve().parents[1] / "src/graph_ingest/demo/graph_schema.yaml"
# Past joining: the first fetches, the relay's first scans and the JVMs' reaction to new clients
SETTLE_S = 5.0


@dataclass(frozen=True)
class IdleCost:
    seconds: float
    cpu_s: dict[str, float]

    @property
    def percent_of_a_core(self) -> dict[str, float]:
        return {group: 100 * s / self.seconds for group, s in self.cpu_s.items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "cpu_s": self.cpu_s,
            "percent_of_a_core": self.percent_of_a_core,
        }


def idle_cost(base: Settings, seconds: float, *, logs: Path) -> IdleCost:
    with isolated(base) as settings, ExitStack() as workers:
        topics = settings.topics
        groups = {
            "applier": (settings.applier.group_id, topics.plans, topics.plan_partitions),
            "planner": (settings.planner.group_id, topics.requests, topics.request_partitions),
            "projector": (
                settings.projector.group_id,
                topics.operations,
                topics.operation_partitions,
            ),
        }
        pids: dict[str, list[int]] = {}
        for kind, (group, topic, partitions) in groups.items():
            processes = workers.enter_context(
                worker_processes(
                    settings,
                    kind,
                    1,
                    logs,
                    GRAPH_INGEST_PLANNER__GRAPH_SCHEMA=str(DEMO_GRAPH_SCHEMA),
                )
            )
            wait_for_group(settings, processes, group, topic, partitions)
            pids[kind] = [p.pid for p in processes]
        time.sleep(SETTLE_S)
        window = CpuWindow(CpuGroups({**pids, **stack_pids(settings)}))
        window.start()
        started = time.monotonic()
        time.sleep(seconds)
        window.stop()
        return IdleCost(time.monotonic() - started, window.spent)
