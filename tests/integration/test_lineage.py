"""Lineage (DESIGN.md §7a): a plan applies only onto the exact state it was planned on, whatever
the order of failures, replans and rebalances; a newer version is never overwritten by an older
one, and the graph ends equal to the committed states."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pytest

from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import GraphError
from graph_ingest.planning.request_planner import PlannedRequest, RequestPlanner
from graph_ingest.producers.ingest_producer import IngestProducer
from graph_ingest.settings import Settings
from graph_ingest.waiting import WaitTimeout, wait_until
from graph_ingest.wiring import build_planner
from tests.integration.conftest import PipelineFactory
from tests.integration.pipeline import CountingWriter, FailingWriter, Pipeline
from tests.samples import Entity, Relation, sample_plan
from tests.unit.planning_fakes import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ALICE = Entity("Person", "Alice")
BOB = Entity("Person", "Bob")
CAROL = Entity("Person", "Carol")
ACME = Entity("Company", "Acme")
GLOBEX = Entity("Company", "Globex")
INITECH = Entity("Company", "Initech")


def elements_of(*states: DocumentState | None) -> tuple[set[str], set[EdgeKey]]:
    """The node ids and edge keys the states list (a missing state lists nothing)."""
    nodes = {n for s in states if s is not None for n in s.node_ids}
    edges = {k for s in states if s is not None for k in s.edge_keys}
    return nodes, edges


def test_an_older_parked_version_never_lands_on_a_newer_lineage(
    pipeline_factory: PipelineFactory,
) -> None:
    # Given a retry ladder slow enough to hold v1 on its first tier while the rest happens
    pipeline = pipeline_factory(retry_delays_s=(3.0, 6.0, 12.0))
    v1 = sample_plan(
        "it",
        "doc",
        "Alice works at Acme.",
        [ALICE, ACME],
        [Relation(ALICE, "WORKS_AT", ACME)],
        graph=pipeline.graph,
    )
    # v2 planned on v1's *planned* state; v3 planned on the committed state (none) after the
    # planner forgot what it had planned
    v2 = sample_plan(
        "it",
        "doc",
        "Alice works at Globex.",
        [ALICE, GLOBEX],
        [Relation(ALICE, "WORKS_AT", GLOBEX)],
        previous=v1.next_state,
        graph=pipeline.graph,
    )
    v3 = sample_plan(
        "it",
        "doc",
        "Bob works at Initech.",
        [BOB, INITECH],
        [Relation(BOB, "WORKS_AT", INITECH)],
        graph=pipeline.graph,
    )
    assert (v2.expected_revision, v3.expected_revision) == (1, 0)
    # v1's graph write keeps timing out (a node only it writes)
    writer = FailingWriter(
        pipeline.settings, StatusCode.DEADLINE_EXCEEDED, culprits=[ACME.node_id("it")]
    )
    pipeline.start_applier(writer)
    pipeline.start_relay()

    # When v1 goes to the retry tier, v2 parks behind it, and v3 commits revision 1
    pipeline.publish(v1)
    pipeline.wait_stage(v1.operation_id, Stage.FAILED)
    pipeline.publish(v2)
    pipeline.wait_stage(v2.operation_id, Stage.PARKED)
    pipeline.publish(v3)
    pipeline.wait_stage(v3.operation_id, Stage.COMPLETED)

    # Then v2, released by revision 1, finds another lineage there: a conflict, not applied
    released = pipeline.wait_stage(v2.operation_id, Stage.CONFLICT)
    assert released.last_error is not None
    assert released.last_error.error_class == "LineageConflict"
    # and v1, back from its tier, conflicts too
    pipeline.wait_stage(v1.operation_id, Stage.CONFLICT, timeout_s=90)
    # and the document is v3's, the graph exactly v3's
    state = pipeline.store.get_document_state("it", "doc")
    assert state is not None
    assert (state.revision, state.operation_id) == (1, v3.operation_id)
    assert pipeline.graph_elements() == elements_of(v3.next_state)


# -- randomized interleavings ---------------------------------------------------------------------

# Systems named from letters only (the demo schema's regex rule makes a System of any such name).
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_SHARED = (
    "Alice works on Project Atlas.",
    "Bob is a member of the Payments Team.",
    "The Payments Team owns the Ledger Service.",
    "The Ledger Service depends on the Billing API.",
    "Carol works on Project Beacon.",
)


def _token(*numbers: int) -> str:
    return "".join(_LETTERS[n % 26] for n in numbers).capitalize()


@dataclass(frozen=True)
class Version:
    document_id: str
    version: int
    text: str
    failures: int
    """How many graph writes of this version fail before one succeeds (DEADLINE_EXCEEDED)."""
    marker: str
    """The name of the System only this version mentions: what the failing writer recognises."""


def versions_of_seed(seed: int, documents: int = 3, versions: int = 5) -> list[Version]:
    """Each document's versions 1..``versions``, in a random interleaving that keeps each
    document's own order; each version a random mix of shared and own sentences."""
    rng = random.Random(seed)
    per_document: list[list[Version]] = []
    for d in range(documents):
        document_id = f"s{seed}-d{d}"
        own = [
            f"The {_token(seed, d, i, 1)} Service relies on the {_token(seed, d, i, 2)} Service."
            for i in range(4)
        ]
        chain = []
        for v in range(1, versions + 1):
            marker = f"{_token(seed, d, v, 7, 7)} Service"
            sentences = [
                *rng.sample(_SHARED, rng.randint(0, 2)),
                *rng.sample(own, rng.randint(1, 3)),
                f"The {marker} relies on the {_token(seed, d, v, 8, 8)} Service.",
            ]
            chain.append(
                Version(
                    document_id,
                    v,
                    " ".join(sentences),
                    failures=rng.choice((0, 0, 0, 1, 4, 5)),
                    marker=marker,
                )
            )
        per_document.append(chain)
    order: list[Version] = []
    while any(per_document):
        chain = rng.choice([c for c in per_document if c])
        order.append(chain.pop(0))
    return order


class FlakyWriter(CountingWriter):
    """The real Neo4j writer, failing the first ``failures`` writes of each version (recognised
    by the marker node name of its own System) with DEADLINE_EXCEEDED."""

    def __init__(self, settings: Settings, versions: Sequence[Version]) -> None:
        super().__init__(settings.neo4j)
        self._left = {v.marker: v.failures for v in versions if v.failures}
        self._lock = threading.Lock()

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None:
        names = {
            str(n.properties.get("name")) for _, m in batch for n in m.node_upserts
        } & self._left.keys()
        with self._lock:
            failing = [name for name in names if self._left[name] > 0]
            for name in failing:
                self._left[name] -= 1
        if failing:
            raise GraphError(
                f"injected timeout for {sorted(failing)}", code=StatusCode.DEADLINE_EXCEEDED
            )
        super().apply(batch)


class ForgetfulPlanner:
    """The real planner, made to forget what it planned (as a failed publish or a revoked
    partition makes it) at random, seeded moments: the next version is then planned on the
    committed state while earlier ones are still on their way."""

    def __init__(self, inner: RequestPlanner, seed: int, chance: float = 0.3) -> None:
        self._inner = inner
        self._rng = random.Random(seed)
        self._chance = chance
        self.forgotten = 0

    def start(self) -> None:
        self._inner.start()

    def close(self) -> None:
        self._inner.close()

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        self._inner.forget(keys)

    def plan_request(self, req: IngestRequest) -> PlannedRequest:
        if self._rng.random() < self._chance:
            self.forgotten += 1
            self._inner.forget([(req.space, req.document_id)])
        return self._inner.plan_request(req)


def test_every_document_ends_at_its_newest_version_and_the_graph_at_its_states(
    pipeline_factory: PipelineFactory, lineage_seeds: list[int]
) -> None:
    # Given versions 1..5 of three documents per seed, interleaved at random, each version's
    # graph write failing a random number of times (some reach the retry tiers)
    versions = [v for seed in lineage_seeds for v in versions_of_seed(seed)]
    pipeline = pipeline_factory()
    settings = pipeline.real_planner_settings()
    planner = ForgetfulPlanner(build_planner(settings), seed=lineage_seeds[0])
    pipeline.start_planner(planner, settings)
    writer = FlakyWriter(pipeline.settings, versions)
    pipeline.start_applier(writer)
    pipeline.start_relay()

    # When they are submitted in that order, a second applier joining the group half way
    rng = random.Random(lineage_seeds[0])
    requests = [request(v.document_id, v.text, document_version=str(v.version)) for v in versions]
    with IngestProducer(pipeline.settings) as producer:
        sent, joined = 0, False
        while sent < len(requests):
            if sent >= len(requests) // 2 and not joined:
                pipeline.start_applier(writer)  # a rebalance while plans are in flight
                joined = True
            burst = rng.randint(1, 4)  # sent in one flush
            producer.submit_many(requests[sent : sent + burst])
            sent += burst

    # Then every document ends at its newest version, with nothing left in flight
    newest = {v.document_id: v for v in versions}

    def settled() -> bool:
        states = {d: pipeline.store.get_document_state("kb", d) for d in newest}
        if any(
            s is None or s.content_hash != content_hash(newest[d].text) for d, s in states.items()
        ):
            return False
        return not pipeline.sql(
            "SELECT 1 FROM operations WHERE stage NOT IN ('COMPLETED', 'CONFLICT') LIMIT 1"
        )

    try:
        wait_until(settled, timeout_s=120 + 2 * len(versions), what="the documents to settle")
    except WaitTimeout:
        pytest.fail(_where_things_are(pipeline, newest))
    states = [pipeline.store.get_document_state("kb", d) for d in newest]
    assert all(
        s is not None and s.document_version == str(newest[s.document_id].version) for s in states
    )
    # and the graph holds exactly what the committed states list: no element of an older lineage
    assert pipeline.graph_elements() == elements_of(*states)
    # and nothing was dead-lettered (the ladder was long enough for every injected failure)
    assert pipeline.sql("SELECT count(*) FROM dlq_entries") == [(0,)]


def _where_things_are(pipeline: Pipeline, newest: dict[str, Version]) -> str:
    """What a failed settle leaves: each document's committed version against its newest, and
    the operations not COMPLETED (with their last error), and the submissions."""
    lines = []
    for document_id, version in sorted(newest.items()):
        state = pipeline.store.get_document_state("kb", document_id)
        at = "no state" if state is None else f"version {state.document_version} r{state.revision}"
        lines.append(f"{document_id}: {at}, newest {version.version}")
    rows = pipeline.sql(
        "SELECT document_id, operation_id, expected_revision, stage, last_error_class,"
        " last_error_message FROM operations WHERE stage <> 'COMPLETED'"
        " ORDER BY document_id, created_at"
    )
    lines += [" | ".join(str(c) for c in row) for row in rows]
    submissions = pipeline.sql(
        "SELECT document_id, submission_id, operation_id FROM ingest_submissions"
        " ORDER BY document_id, planned_at"
    )
    lines += ["submission " + " | ".join(str(c) for c in row) for row in submissions]
    return "the documents did not settle:\n" + "\n".join(lines)
