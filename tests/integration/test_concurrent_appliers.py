"""Two appliers working on one document at once, against real PostgreSQL and Neo4j: a zombie that
lost its partition and the new owner (issue 9 item 4), and an admission racing a release (item 12).

The appliers are driven directly (no Kafka): the race is staged with hooks in the real store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from graph_ingest.consumers.applier.apply import Outcome, PlanApplier
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from graph_ingest.schemas.codec import encode_operation, encode_plan
from graph_ingest.store.base import UnitOfWork
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import build_applier
from tests.integration.pipeline import CountingWriter, Pipeline
from tests.integration.test_applier import doc_v1, doc_v2, planned_elements

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Hook = Callable[[], None]


def message(plan: IngestionPlan, offset: int) -> PlanMessage:
    return PlanMessage(
        topic="plans", partition=0, offset=offset, key=plan.key.encode(), value=encode_plan(plan),
        plan=plan,
    )  # fmt: skip


class _HookedUnitOfWork:
    def __init__(self, inner: UnitOfWork, after_revisions: Hook) -> None:
        self._inner = inner
        self._after_revisions = after_revisions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def document_revisions(self, keys: Sequence[tuple[str, str]]) -> Any:
        found = self._inner.document_revisions(keys)
        self._after_revisions()
        return found


class HookedStore(PostgresOperationStore):
    """The real store, calling ``after_revisions`` inside a unit of work once it has read the
    document revisions, and ``after_unit(n)`` once its n-th unit of work has committed."""

    def __init__(self, pipeline: Pipeline) -> None:
        settings = pipeline.settings
        super().__init__(
            settings.postgres,
            event_encoder=encode_operation,
            operations_topic=settings.topics.operations,
        )
        self.after_revisions: Hook = lambda: None
        self.after_unit: Callable[[int], None] = lambda n: None
        self._units = 0

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        with super().unit_of_work() as uow:
            yield _HookedUnitOfWork(uow, lambda: self.after_revisions())
        self._units += 1
        self.after_unit(self._units)


@contextmanager
def applier(pipeline: Pipeline) -> Iterator[tuple[PlanApplier, HookedStore, CountingWriter]]:
    store = HookedStore(pipeline)
    writer = CountingWriter(pipeline.settings.neo4j)
    store.start()
    writer.start()
    try:
        yield build_applier(pipeline.settings, store, writer), store, writer
    finally:
        writer.close()
        store.close()


def test_a_zombie_never_writes_a_plan_whose_document_moved_on(pipeline: Pipeline) -> None:
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    admitted, go = threading.Event(), threading.Event()
    with (
        applier(pipeline) as (zombie, zombie_store, zombie_writer),
        applier(pipeline) as (
            owner,
            _,
            _,
        ),
    ):
        # Given a worker that admitted v1 and then stalled (its partition went elsewhere)
        def stall_after_admission(unit: int) -> None:
            if unit == 1:
                admitted.set()
                assert go.wait(60)

        zombie_store.after_unit = stall_after_admission
        outcome: list[BaseException | dict[Any, Outcome]] = []

        def run_zombie() -> None:
            try:
                outcome.append(zombie.apply([message(v1, 0)]))
            except GraphIngestError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run_zombie)
        thread.start()
        assert admitted.wait(30)
        # When the new owner applies v1 and v2 meanwhile
        assert owner.apply([message(v1, 0)]) == {("plans", 0, 0): Outcome.COMPLETED}
        assert owner.apply([message(v2, 1)]) == {("plans", 0, 1): Outcome.COMPLETED}
        # and the zombie wakes up
        go.set()
        thread.join(30)
        # Then the zombie wrote nothing, and the graph is exactly v2's
        assert zombie_writer.mutations_written == 0
        assert isinstance(outcome[0], GraphIngestError), outcome
        nodes, edges = pipeline.graph_elements()
        assert edges == planned_elements(v2)[1]
        assert nodes == planned_elements(v1, v2)[0]
        # and applying its v1 again is a mere duplicate
        assert zombie.apply([message(v1, 0)]) == {("plans", 0, 0): Outcome.DUPLICATE}
    assert pipeline.store.get_document_state("it", "doc-1").revision == 2  # type: ignore[union-attr]


def test_parking_and_the_release_after_a_commit_cannot_miss_each_other(
    pipeline: Pipeline,
) -> None:
    v1 = doc_v1(pipeline)
    v2 = doc_v2(pipeline, v1.next_state)
    v2_read_revision, v1_committed = threading.Event(), threading.Event()
    with (
        applier(pipeline) as (first, first_store, _),
        applier(pipeline) as (second, second_store, _),
    ):
        # Given the second applier reads v2's document at revision 0 (so v2 must park) ...
        def hold_the_decision() -> None:
            v2_read_revision.set()
            v1_committed.wait(3)  # with the lock, v1 cannot commit meanwhile: go on after 3 s

        second_store.after_revisions = hold_the_decision
        outcomes: list[dict[Any, Outcome]] = []
        thread = threading.Thread(target=lambda: outcomes.append(second.apply([message(v2, 1)])))
        thread.start()
        assert v2_read_revision.wait(30)
        second_store.after_revisions = lambda: None
        # ... while the first applier commits v1
        first_store.after_unit = lambda unit: v1_committed.set() if unit == 3 else None
        assert first.apply([message(v1, 0)]) == {("plans", 0, 0): Outcome.COMPLETED}
        thread.join(30)
        assert outcomes == [{("plans", 0, 1): Outcome.PARKED}]
    # Then v2 was released by v1's commit: its plan is back in the outbox for the plans topic
    released = wait_until(
        lambda: pipeline.sql(
            "SELECT operation_id FROM outbox WHERE topic = %s AND headers->>'released' = 'parked'",
            pipeline.settings.topics.plans,
        ),
        timeout_s=10,
        what="the release of v2",
    )
    assert released == [(v2.operation_id,)]
    parked = pipeline.store.get_operation(v2.operation_id)
    assert parked is not None and parked.stage is Stage.PARKED
