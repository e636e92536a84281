"""Seed-style: one plan at a time through the project's own applier, store and graph writer.

Each plan is decoded and its fingerprint verified (what the consumer does per message), then
applied alone (``PlanApplier.apply([message])``): admission, registrations + graph + GRAPH_APPLIED,
and the state commit — three PostgreSQL commits and one Neo4j transaction per plan. No Kafka and
no relay (the outbox rows stay unpublished).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cpu import NEO4J, POSTGRES, CpuGroups, CpuWindow, stack_pids
from isolation import check_completed, check_graph, isolated, schema_bytes
from results import SEED_STYLE, Run
from workloads import Workload

from graph_ingest.consumers.applier.apply import Outcome, PlanApplier
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.graph.neo4j import Neo4jGraphWriter
from graph_ingest.schemas.codec import decode_plan
from graph_ingest.settings import Settings
from graph_ingest.wiring import build_applier, postgres_store, started


def apply_one_by_one(
    applier: PlanApplier, workload: Workload, plans: Sequence[IngestionPlan]
) -> None:
    for offset, message in enumerate(workload.messages(plans, "seed-style")):
        plan = decode_plan(message.value)
        plan.verify_fingerprint()
        consumed = PlanMessage("seed-style", 0, offset, message.key, message.value, plan=plan)
        outcome = applier.apply([consumed])
        if outcome != {consumed.position: Outcome.COMPLETED}:
            raise AssertionError(f"{consumed.context()}: {outcome}, not COMPLETED")


def seed_style(base: Settings, workload: Workload) -> Run:
    with isolated(base, kafka=False) as settings:
        store = postgres_store(settings)
        graph = Neo4jGraphWriter(settings.neo4j)
        with started(store, graph):
            applier = build_applier(settings, store, graph)
            apply_one_by_one(applier, workload, (*workload.warmup, *workload.setup))
            before = schema_bytes(settings)
            window = CpuWindow(CpuGroups(stack_pids(settings, [NEO4J, POSTGRES]), client=True))
            window.start()
            started_at = time.perf_counter()
            apply_one_by_one(applier, workload, workload.plans)
            seconds = time.perf_counter() - started_at
            window.stop()
        growth = schema_bytes(settings) - before
        check_completed(settings, workload.applied)
        check_graph(settings, workload.graph.node_label, workload.applied)
    return Run.of(
        workload,
        SEED_STYLE,
        seconds,
        pg_bytes_per_plan=growth / len(workload.plans),
        cpu_s=window.spent,
        jit_s=window.jit_spent,
    )
