"""CPU time of process groups over a window, read from /proc: what a run costs every process that
works for it, not only the one that is timed.

A group is a set of root pids (the appliers; Kafka; Neo4j; PostgreSQL's postmaster). A root's CPU
is its own user + system time, its reaped children's (cutime + cstime: PostgreSQL's backends that
ended, a JVM's helpers) and every live descendant's, read the same way. A descendant that ends
inside the window moves from "live" to its parent's cutime, so the sum stays whole. The benchmark
process counts itself through ``resource`` (its own threads only run the measured client).

Of a JVM service's CPU, the share its JIT compiler threads spent is read apart (``jit``): Kafka
compiles its hot code for many minutes after it starts (issue 20: half of its CPU per plan in the
first three minutes of traffic, a fifth to a third after seven), so a window's Kafka or Neo4j
figure says how much of it was warm-up.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
WORKERS = "workers"
CLIENT = "client"
KAFKA = "kafka"
NEO4J = "neo4j"
POSTGRES = "postgres"
STACK_SERVICES = (KAFKA, NEO4J, POSTGRES)
JVM_SERVICES = (KAFKA, NEO4J)
# HotSpot's compiler threads, "C1 CompilerThread0" and "C2 CompilerThread0" (comm keeps 15 bytes)
JIT_THREAD_PREFIXES = ("C1 CompilerThre", "C2 CompilerThre")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0]); None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _own_and_reaped_s(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (0 once it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS_PER_S


def tree_cpu_s(root: int, children: Mapping[int, list[int]]) -> float:
    """CPU seconds of ``root``, its reaped children and its live descendants."""
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        total += _own_and_reaped_s(pid)
        pending.extend(children.get(pid, ()))
    return total


def _thread_stats(pid: int) -> Iterator[tuple[int, str, list[str]]]:
    """Each live thread of ``pid``: its id, its name (comm) and its stat fields after the name."""
    for entry in os.scandir(f"/proc/{pid}/task"):
        try:
            text = Path(entry.path, "stat").read_text(encoding="ascii", errors="replace")
        except (FileNotFoundError, ProcessLookupError):  # the thread ended while /proc was read
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        yield int(entry.name), name, text.rsplit(")", 1)[1].split()


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """Each live thread of ``pid``: its name (comm) and CPU seconds, by thread id."""
    return {
        tid: (name, (int(fields[11]) + int(fields[12])) / TICKS_PER_S)
        for tid, name, fields in _thread_stats(pid)
    }


def jit_threads_s(pid: int) -> dict[tuple[int, int], float]:
    """Each live JIT compiler thread of the JVM ``pid``, by (thread id, start tick), and its CPU
    seconds to the nanosecond (schedstat); empty once the JVM is gone.

    By thread, because HotSpot starts and ends compiler threads as its queue grows and drains: a
    sum would lose a whole thread's CPU when it ends inside a window."""
    threads: dict[tuple[int, int], float] = {}
    try:
        for tid, name, fields in _thread_stats(pid):
            if not name.startswith(JIT_THREAD_PREFIXES):
                continue
            try:
                schedstat = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text(encoding="ascii")
            except (FileNotFoundError, ProcessLookupError):
                continue
            threads[tid, int(fields[19])] = int(schedstat.split()[0]) / 1e9
    except FileNotFoundError:
        return {}
    return threads


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _spent(now: Mapping[str, float], earlier: Mapping[str, float]) -> dict[str, float]:
    return {g: now[g] - earlier.get(g, 0.0) for g in now}


def _jit_spent(
    now: Mapping[str, Mapping[tuple[int, int], float]],
    earlier: Mapping[str, Mapping[tuple[int, int], float]],
) -> dict[str, float]:
    """By thread: one that started inside the window counts whole, one that ended counts 0."""
    return {
        group: sum(s - earlier.get(group, {}).get(thread, 0.0) for thread, s in threads.items())
        for group, threads in now.items()
    }


class CpuGroups:
    """Named groups of root pids, read together; ``client`` is this process when asked for."""

    def __init__(self, groups: Mapping[str, Iterable[int]], *, client: bool = False) -> None:
        self._groups = {name: tuple(pids) for name, pids in groups.items()}
        self._client = client

    def seconds(self) -> dict[str, float]:
        """CPU seconds of each group now."""
        children = _children_by_parent()
        seconds = {
            name: sum(tree_cpu_s(pid, children) for pid in pids)
            for name, pids in self._groups.items()
        }
        if self._client:
            seconds[CLIENT] = _self_cpu_s()
        return seconds

    def jit_threads(self) -> dict[str, dict[tuple[int, int], float]]:
        """The JIT compiler threads' CPU seconds of each JVM group now, by thread."""
        return {
            name: {thread: s for pid in pids for thread, s in jit_threads_s(pid).items()}
            for name, pids in self._groups.items()
            if name in JVM_SERVICES
        }


def stack_pids(settings: Settings, names: Iterable[str] = STACK_SERVICES) -> dict[str, list[int]]:
    """The running stack's service pids by group; a service that is not running is an error."""
    status = LocalStack(settings).status()
    pids: dict[str, list[int]] = {}
    for name in names:
        pid = status.service(name).pid
        if pid is None:
            raise RuntimeError(f"{name} of the stack is not running: no CPU to read")
        pids[name] = [pid]
    return pids


def jvm_lifetimes(settings: Settings) -> dict[str, dict[str, float]]:
    """Each JVM service of the running stack since it started: its age, its CPU seconds, and of
    them its JIT compilers' (those still running: at least what it spent compiling). How warm the
    stack is that a run measured on."""
    with open("/proc/uptime", encoding="ascii") as uptime:
        now_s = float(uptime.read().split()[0])
    lifetimes = {}
    for name, (pid,) in stack_pids(settings, JVM_SERVICES).items():
        fields = _stat_fields(pid)
        if fields is None:
            raise RuntimeError(f"{name} of the stack ended while it was read")
        lifetimes[name] = {
            "age_s": now_s - int(fields[19]) / TICKS_PER_S,
            "cpu_s": _own_and_reaped_s(pid),
            "jit_s": sum(jit_threads_s(pid).values()),
        }
    return lifetimes


class CpuWindow:
    """CPU seconds each group spent between ``start()`` and ``stop()`` (``spent``), and of it the
    JVM services' JIT compiler threads (``jit_spent``)."""

    def __init__(self, groups: CpuGroups) -> None:
        self._groups = groups
        self._start_seconds: dict[str, float] | None = None
        self._start_jit: dict[str, dict[tuple[int, int], float]] = {}
        self.spent: dict[str, float] = {}
        self.jit_spent: dict[str, float] = {}

    def start(self) -> None:
        # The JIT is read after the totals here and before them in stop(), so that its window
        # lies inside theirs and it cannot come out larger than the group it is part of.
        self._start_seconds = self._groups.seconds()
        self._start_jit = self._groups.jit_threads()

    def stop(self) -> dict[str, float]:
        if self._start_seconds is None:
            raise RuntimeError("CpuWindow.stop() before start()")
        end_jit = self._groups.jit_threads()
        self.spent = _spent(self._groups.seconds(), self._start_seconds)
        self.jit_spent = _jit_spent(end_jit, self._start_jit)
        return self.spent
