"""Applier processes in one consumer group under each group protocol (issue 19 item 5): the
classic protocol with the cooperative-sticky assignor, and the consumer protocol (KIP-848) whose
assignments and session timeout the broker owns. Members leave politely (SIGTERM: drain, commit,
leave) or by a crash (SIGKILL: the session expires), and others join, while plans flow."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from neo4j import GraphDatabase

from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.waiting import wait_until
from tests.crash.appliers import (
    completed,
    group_assignments,
    group_members,
    start_applier,
    wait_completed,
)
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import planned_elements
from tests.kafka_messages import group_offsets
from tests.samples import Entity, Relation, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(300)]

PARTITIONS = 6
PROTOCOLS = pytest.mark.parametrize("protocol", ["classic", "consumer"])
# The session timeout each protocol runs with here: the classic one is the client's setting
# (raised above its 10 s default, so that a hand-over by session expiry cannot pass for a
# prompt one); the consumer protocol's is the broker's group.consumer.session.timeout.ms default.
SESSION_TIMEOUT_S = {"classic": 30.0, "consumer": 45.0}


def protocol_env(protocol: str, **more: str) -> dict[str, str]:
    env = {"GRAPH_INGEST_KAFKA__GROUP_PROTOCOL": protocol, **more}
    if protocol == "classic":
        env["GRAPH_INGEST_KAFKA__SESSION_TIMEOUT_MS"] = str(int(SESSION_TIMEOUT_S[protocol] * 1000))
    return env


def people(pipeline: Pipeline, first: int, last: int) -> list[IngestionPlan]:
    """One document per person: the person, their employer (one of 40, shared between
    documents) and the edge between them."""
    plans = []
    for i in range(first, last):
        person, company = Entity("Person", f"person {i}"), Entity("Company", f"company {i % 40}")
        plans.append(
            sample_plan(
                "it",
                f"doc-{i}",
                f"Person {i} works at company {i % 40}.",
                [person, company],
                [Relation(person, "WORKS_AT", company)],
                graph=pipeline.graph,
            )
        )
    return plans


def plan_partitions(pipeline: Pipeline) -> dict[str, set[int]]:
    """Each member's partitions of the plans topic (the retry tiers left out)."""
    topic = pipeline.settings.topics.plans
    return {
        member: {p for t, p in owned if t == topic}
        for member, owned in group_assignments(pipeline).items()
    }


def owners(pipeline: Pipeline) -> set[str]:
    """The members that own plans partitions."""
    return {member for member, partitions in plan_partitions(pipeline).items() if partitions}


def graph_counts(pipeline: Pipeline) -> tuple[int, int]:
    """Nodes and relationships in the pipeline's label space, counted (a duplicate shows)."""
    label = pipeline.graph.node_label
    with GraphDatabase.driver(
        pipeline.settings.neo4j.uri, auth=pipeline.settings.neo4j.auth()
    ) as d:
        nodes, _, _ = d.execute_query(f"MATCH (n:`{label}`) RETURN count(n) AS c")
        edges, _, _ = d.execute_query(f"MATCH (:`{label}`)-[r]->(:`{label}`) RETURN count(r) AS c")
    return nodes[0]["c"], edges[0]["c"]


def leave(processes: Sequence[subprocess.Popen[bytes]], log: Path) -> None:
    """SIGTERM every process; each must drain and exit cleanly."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(timeout=60) == 0, log.read_text()[-3000:]


def assert_applied_once(pipeline: Pipeline, plans: Sequence[IngestionPlan]) -> None:
    """Every plan COMPLETED, each exactly once; the graph exactly what they plan; every plans
    partition's committed offset at its end."""
    assert pipeline.sql("SELECT stage, count(*) FROM operations GROUP BY stage") == [
        ("COMPLETED", len(plans))
    ]
    history = pipeline.sql(
        "SELECT count(*), count(DISTINCT operation_id), count(DISTINCT document_id) "
        "FROM document_history"
    )
    assert history == [(len(plans), len(plans), len(plans))]
    assert pipeline.sql("SELECT max(revision) FROM document_states") == [(1,)]
    nodes, edges = planned_elements(*plans)
    assert pipeline.graph_elements() == (nodes, edges)
    assert graph_counts(pipeline) == (len(nodes), len(edges))
    committed, ends = group_offsets(pipeline.settings, pipeline.settings.topics.plans, PARTITIONS)
    assert sum(ends.values()) == len(plans)
    assert committed == ends


@PROTOCOLS
def test_a_sigtermed_applier_hands_its_partitions_over_well_before_the_session_timeout(
    protocol: str,
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    pipeline = pipeline_factory(plan_partitions=PARTITIONS)
    plans = people(pipeline, 0, 900)
    log = tmp_path / "appliers.log"
    env = protocol_env(protocol)
    # Given two appliers sharing the plans partitions
    leaving = start_applier(pipeline, log, "applier-1", **env)
    staying = start_applier(pipeline, log, "applier-2", **env)
    processes += [leaving, staying]
    wait_until(
        lambda: owners(pipeline) == {"applier-1", "applier-2"} == group_members(pipeline),
        timeout_s=90,
        what="both appliers owning plans partitions",
    )
    # When one is SIGTERMed while plans flow
    publishing = pipeline.publish_in_steps(plans)
    wait_completed(pipeline, 200)
    sigterm_at = time.monotonic()
    leaving.send_signal(signal.SIGTERM)
    # Then it drains, commits and leaves, and the other owns every partition promptly
    assert leaving.wait(timeout=60) == 0, log.read_text()[-3000:]
    wait_until(
        lambda: plan_partitions(pipeline) == {"applier-2": set(range(PARTITIONS))},
        timeout_s=SESSION_TIMEOUT_S[protocol],
        interval_s=0.1,
        what="the staying applier owning every plans partition",
    )
    handed_over_s = time.monotonic() - sigterm_at
    assert handed_over_s < SESSION_TIMEOUT_S[protocol] / 3, log.read_text()[-3000:]
    # and every plan applies once, nothing left uncommitted
    publishing.join(timeout=120)
    wait_completed(pipeline, len(plans))
    leave([staying], log)
    assert_applied_once(pipeline, plans)


@PROTOCOLS
def test_three_appliers_lose_one_to_sigkill_and_gain_one_without_losing_or_repeating_a_plan(
    protocol: str,
    pipeline_factory: PipelineFactory,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    pipeline = pipeline_factory(plan_partitions=PARTITIONS)
    plans = people(pipeline, 0, 1000)
    log = tmp_path / "appliers.log"
    # the classic protocol's default session timeout (the kill is noticed when it expires)
    env = {"GRAPH_INGEST_KAFKA__GROUP_PROTOCOL": protocol}
    # Given three appliers in one group, each owning plans partitions
    names = ["applier-1", "applier-2", "applier-3"]
    appliers = {name: start_applier(pipeline, log, name, **env) for name in names}
    processes += appliers.values()
    wait_until(lambda: owners(pipeline) == set(names), timeout_s=90, what="three owners")
    # When the plans flow in, one applier is SIGKILLed mid-work and a fourth joins
    pipeline.publish(*plans[:400])
    publishing = pipeline.publish_in_steps(plans[400:])
    wait_completed(pipeline, 250)
    appliers["applier-2"].kill()
    appliers["applier-2"].wait(timeout=30)
    killed_at = completed(pipeline)
    appliers["applier-4"] = start_applier(pipeline, log, "applier-4", **env)
    processes.append(appliers["applier-4"])
    publishing.join(timeout=120)
    # Then every plan completes (the killed one's partitions move once its session expires)
    wait_completed(pipeline, len(plans), timeout_s=180)
    assert killed_at < len(plans)  # the kill came while there was work to take over
    survivors = {"applier-1", "applier-3", "applier-4"}
    wait_until(
        lambda: owners(pipeline) == survivors == group_members(pipeline),
        timeout_s=90,
        what="the survivors, and only they, in the group, each owning plans partitions",
    )
    leave([appliers[name] for name in sorted(survivors)], log)
    # and nothing was lost, nothing applied twice, every offset committed
    assert_applied_once(pipeline, plans)
