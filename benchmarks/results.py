"""One measured run of a workload, as every way of applying it reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads import Workload

CEILING = "ceiling"
SEED_STYLE = "seed-style"
PIPELINE_1 = "pipeline x1"
PIPELINE_2 = "pipeline x2"
PACED = "pipeline x1 paced"
"""One applier with the producer paced at half the x1 rate: for latency, not for throughput."""
TRICKLE = "pipeline x1 trickle"
"""One applier, plans published one at a time at ``TRICKLE_PLANS_PER_S``: a lone plan's latency."""
METHODS = (CEILING, SEED_STYLE, PIPELINE_1, PIPELINE_2)
LATENCY_METHODS = (TRICKLE, PACED)


@dataclass
class Run:
    workload: str
    method: str
    plans: int
    elements: int
    seconds: float
    peak_rss_bytes: int | None = None
    """VmHWM of the applier process (the larger of two)."""
    pg_bytes_per_plan: float | None = None
    latency_ms: dict[str, float] | None = None
    """p50/p95/p99 publish→COMPLETED with the producer paced at ``paced_plans_per_s``."""
    paced_plans_per_s: float | None = None
    cpu_s: dict[str, float] | None = None
    """CPU seconds of each process group over the run's window (``cpu.py``)."""
    jit_s: dict[str, float] | None = None
    """Of ``cpu_s``, the seconds the JVM services' JIT compiler threads spent (``cpu.py``)."""
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, workload: Workload, method: str, seconds: float, **measured: Any) -> Run:
        """The run of ``method`` over ``workload``'s measured plans."""
        return cls(
            workload.name, method, len(workload.plans), workload.elements, seconds, **measured
        )

    @property
    def plans_per_s(self) -> float:
        return self.plans / self.seconds

    @property
    def elements_per_s(self) -> float:
        return self.elements / self.seconds

    @property
    def cpu_ms_per_plan(self) -> dict[str, float] | None:
        """Each group's CPU per measured plan, and their ``total``."""
        if self.cpu_s is None:
            return None
        per_plan = self._ms_per_plan(self.cpu_s)
        return {**per_plan, "total": sum(per_plan.values())}

    @property
    def jit_ms_per_plan(self) -> dict[str, float] | None:
        """Of ``cpu_ms_per_plan``, the JVM services' JIT compilers' share, by group."""
        if self.jit_s is None:
            return None
        return self._ms_per_plan(self.jit_s)

    def _ms_per_plan(self, seconds: dict[str, float]) -> dict[str, float]:
        return {g: s * 1000 / self.plans for g, s in seconds.items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "method": self.method,
            "plans": self.plans,
            "elements": self.elements,
            "seconds": self.seconds,
            "plans_per_s": self.plans_per_s,
            "elements_per_s": self.elements_per_s,
            "peak_rss_bytes": self.peak_rss_bytes,
            "pg_bytes_per_plan": self.pg_bytes_per_plan,
            "latency_ms": self.latency_ms,
            "paced_plans_per_s": self.paced_plans_per_s,
            "cpu_s": self.cpu_s,
            "cpu_ms_per_plan": self.cpu_ms_per_plan,
            "jit_s": self.jit_s,
            "jit_ms_per_plan": self.jit_ms_per_plan,
            **self.details,
        }


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and p99 (nearest rank) of ``values``."""
    ordered = sorted(values)
    last = len(ordered) - 1
    return {f"p{q}": ordered[min(last, round(q / 100 * last))] for q in (50, 95, 99)}
