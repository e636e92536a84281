import pytest

from graph_ingest.consumers import batching
from graph_ingest.consumers.batching import node_locks, select_batch
from graph_ingest.consumers.offsets import OffsetTracker
from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.domain.errors import FingerprintMismatch
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert, PropertyValue
from graph_ingest.domain.plan import GraphOptions, IngestionPlan
from tests.unit.plans import plan_for


def message(  # type: ignore[no-untyped-def]
    offset: int, document_id: str | None, partition: int = 0, size: int = 10, **plan_update
) -> PlanMessage:
    if document_id is None:
        return PlanMessage(
            "plans", partition, offset, None, b"junk", error=FingerprintMismatch("x")
        )
    plan = plan_for(document_id)
    if plan_update:
        plan = plan.model_copy(update=plan_update)
    return PlanMessage("plans", partition, offset, plan.key.encode(), b"x" * size, plan=plan)


def changing(offset: int, mutation: Mutation, **message_options) -> PlanMessage:  # type: ignore[no-untyped-def]
    """A plan of its own document (named after the offset) that makes exactly ``mutation``."""
    return message(offset, f"doc-{offset}", mutation=mutation, **message_options)


def upserts(*node_ids: str, **properties: PropertyValue) -> Mutation:
    return Mutation(
        node_upserts=tuple(NodeUpsert(node_id=n, properties=properties) for n in node_ids)
    )


def links(src: str, dst: str, *upserted: str, **properties: PropertyValue) -> Mutation:
    """An edge src->dst; the plan upserts only ``upserted`` (the other endpoints must exist)."""
    return Mutation(
        node_upserts=tuple(NodeUpsert(node_id=n) for n in upserted),
        edge_upserts=(EdgeUpsert(src=src, type="R", dst=dst, properties=properties),),
    )


def unlinks(src: str, dst: str) -> Mutation:
    return Mutation(edge_deletes=(EdgeKey(src=src, type="R", dst=dst),))


def deletes(node_id: str, *, detach: bool = False) -> Mutation:
    return Mutation(node_deletes=(node_id,), detach_deleted_nodes=detach)


def select(
    *pending: PlanMessage,
    max_plans: int = 10,
    max_bytes: int = 10_000,
    max_locks: int | None = None,
) -> tuple[list[int], list[int]]:
    batch, deferred = select_batch(
        list(pending), max_plans=max_plans, max_bytes=max_bytes, max_locks=max_locks
    )
    return offsets(batch), offsets(deferred)


def offsets(messages: list[PlanMessage]) -> list[int]:
    return [m.offset for m in messages]


def test_one_plan_per_document_later_ones_wait_in_order() -> None:
    pending = [message(0, "a"), message(1, "b"), message(2, "a"), message(3, "c"), message(4, "a")]
    batch, deferred = select_batch(pending, max_plans=10, max_bytes=10_000)
    assert offsets(batch) == [0, 1, 3]
    assert offsets(deferred) == [2, 4]
    batch, deferred = select_batch(deferred, max_plans=10, max_bytes=10_000)
    assert offsets(batch) == [2]
    assert offsets(deferred) == [4]


def test_batch_is_bounded_by_count_and_bytes() -> None:
    pending = [message(i, f"d{i}") for i in range(5)]
    assert offsets(select_batch(pending, max_plans=2, max_bytes=10_000)[0]) == [0, 1]
    assert offsets(select_batch(pending, max_plans=10, max_bytes=25)[0]) == [0, 1]
    # a single message larger than the byte bound still goes alone rather than wedging
    assert offsets(select_batch(pending, max_plans=10, max_bytes=1)[0]) == [0]


def test_batch_is_bounded_by_the_postgres_locks_its_plans_take() -> None:
    pending = [message(i, f"d{i}") for i in range(5)]  # three registrations each
    assert select(*pending, max_locks=9) == ([0, 1, 2], [3, 4])
    assert select(*pending, max_locks=8) == ([0, 1], [2, 3, 4])
    assert select(*pending) == ([0, 1, 2, 3, 4], [])
    # a plan taking more locks than the bound still goes alone rather than wedging
    assert select(*pending, max_locks=1) == ([0], [1, 2, 3, 4])


def test_a_plan_takes_a_lock_per_registered_node_and_per_node_its_conditional_deletes_check() -> (
    None
):
    mutation = Mutation(
        node_upserts=(NodeUpsert(node_id="n"),),
        node_deletes=("gone",),
        edge_deletes=(EdgeKey(src="a", type="R", dst="b"),),
    )
    plan = plan_for("d")  # three registrations
    assert node_locks(plan.model_copy(update={"mutation": mutation})) == 3
    conditional = mutation.model_copy(update={"deletes_if_unreferenced": True})
    assert node_locks(plan.model_copy(update={"mutation": conditional})) == 3 + 1 + 2


def test_a_plan_deferred_by_the_lock_bound_is_not_overtaken_by_a_conflicting_one() -> None:
    first = changing(0, upserts("x"))
    held = changing(1, upserts("n", title="old"))
    later = changing(2, upserts("n", title="new"), registrations=())
    unrelated = changing(3, upserts("m"), registrations=())
    assert select(first, held, later, unrelated, max_locks=4) == ([0, 3], [1, 2])


def test_a_plan_deferred_again_is_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[str] = []
    footprint_of = batching._Footprint.of

    def counting(plan: IngestionPlan) -> batching._Footprint:
        walked.append(plan.operation_id)
        return footprint_of(plan)

    monkeypatch.setattr(batching._Footprint, "of", staticmethod(counting))
    pending = [message(i, "d", mutation=upserts(f"n{i}")) for i in range(3)]  # one document
    footprints: batching.Footprints = {}
    batch, deferred = select_batch(pending, 10, 10_000, footprints=footprints)
    assert (offsets(batch), offsets(deferred)) == ([0], [1, 2])
    assert sorted(footprints) == [m.position for m in deferred]
    assert len(walked) == 3
    batch, deferred = select_batch(deferred, 10, 10_000, footprints=footprints)
    assert (offsets(batch), offsets(deferred)) == ([1], [2])
    assert len(walked) == 3  # both came from the kept footprints
    assert sorted(footprints) == [deferred[0].position]


def test_plans_deferred_by_a_bound_are_folded_only_when_a_later_plan_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folded: list[int] = []
    record = batching._record

    def counting(deferred, upserts) -> None:  # type: ignore[no-untyped-def]
        folded.append(len(upserts))
        record(deferred, upserts)

    monkeypatch.setattr(batching, "_record", counting)
    backlog = [changing(i, upserts(f"n{i}", f"m{i}")) for i in range(6)]  # three locks each
    assert select(*backlog, max_locks=6) == ([0, 1], [2, 3, 4, 5])
    assert folded == []  # every later plan was deferred by the bound alone
    lockless = changing(6, deletes("n2"), registrations=())
    assert select(*backlog, lockless, max_locks=6) == ([0, 1], [2, 3, 4, 5, 6])
    assert len(folded) == 2 * 4  # checked against the four deferred plans' nodes and edges


def test_undecodable_messages_always_join_the_batch() -> None:
    pending = [message(0, "a"), message(1, None), message(2, "a")]
    batch, deferred = select_batch(pending, max_plans=10, max_bytes=10_000)
    assert offsets(batch) == [0, 1]
    assert offsets(deferred) == [2]


def test_a_delete_of_what_the_batch_upserts_waits() -> None:
    upserter = message(0, "a")
    edge = upserter.plan.mutation.edge_upserts[0].key  # type: ignore[union-attr]
    deleter = message(
        1,
        "b",
        mutation=Mutation(edge_deletes=(EdgeKey(src=edge.src, type=edge.type, dst=edge.dst),)),
    )
    batch, deferred = select_batch([upserter, deleter], max_plans=10, max_bytes=10_000)
    assert offsets(batch) == [0]
    assert offsets(deferred) == [1]


def test_a_deferred_plan_holds_back_a_later_plan_that_conflicts_with_it() -> None:
    # Issue 9: [A upserts N, C detach-deletes N, D upserts N] must not run {A, D} then C.
    a, c, d = (
        changing(0, upserts("n")),
        changing(1, deletes("n", detach=True)),
        changing(2, upserts("n")),
    )
    assert select(a, c, d) == ([0], [1, 2])
    assert select(c, d) == ([1], [2])


def test_a_plan_deferred_by_the_byte_bound_is_not_overtaken_by_a_conflicting_one() -> None:
    big = changing(1, upserts("n", title="old"), size=100)
    later = changing(2, upserts("n", title="new"))
    unrelated = changing(3, upserts("m"))
    assert select(changing(0, upserts("x")), big, later, unrelated, max_bytes=50) == (
        [0, 3],
        [1, 2],
    )


def test_a_plan_deferred_behind_its_document_holds_back_what_conflicts_with_it() -> None:
    first = message(0, "a", mutation=upserts("n"))
    second = message(1, "a", mutation=deletes("n", detach=True))
    assert select(first, second, changing(2, upserts("n"))) == ([0], [1, 2])


def test_against_a_deferred_plan_every_overlap_defers_unless_the_two_commute() -> None:
    # the held-back plan is deferred by the byte bound; the later one would fit
    for held_back, later in [
        (upserts("x", v=1), upserts("x", v=2)),  # the later value must win
        (upserts("x", v=1), upserts("x", v=1.0)),  # Neo4j keeps an integer and a float apart
        (upserts("x", v=1), upserts("x", v=True)),
        (upserts("x", v=[1]), upserts("x", v=[1.0])),
        (upserts("x", v=1), upserts("x", v=None)),  # None removes the property
        (upserts("x"), links("y", "x")),  # the later edge must find x
        (links("y", "x"), upserts("x")),  # the earlier edge must not find x
        (links("y", "x"), deletes("x", detach=True)),
        (links("y", "x", w=1), links("y", "x", w=2)),  # the same edge: the later value wins
        (unlinks("y", "x"), links("y", "x")),
        (links("y", "x"), unlinks("y", "x")),
    ]:
        pending = [changing(1, upserts("a")), changing(2, held_back, size=100), changing(3, later)]
        assert select(*pending, max_bytes=50) == ([1], [2, 3]), (held_back, later)
    # two plans that only name x as an endpoint commute: neither changes x
    pending = [
        changing(1, upserts("a")),
        changing(2, links("y", "x"), size=100),
        changing(3, links("z", "x")),
    ]
    assert select(*pending, max_bytes=50) == ([1, 3], [2])
    # two upserts that agree on every property they both set leave the same element either way
    for held_back, later in [
        (upserts("x", name="X", v=1), upserts("x", name="X", w=2)),
        (upserts("x", v=[1, 2]), upserts("x", v=[1, 2])),
        (links("y", "x", "y", "x", w=1), links("y", "x", "y", "x", w=1, since=2)),
    ]:
        pending = [changing(1, upserts("a")), changing(2, held_back, size=100), changing(3, later)]
        assert select(*pending, max_bytes=50) == ([1, 3], [2]), (held_back, later)
    # deferred upserts that set v to 1 and 2: a later v agrees with one of them at most
    pending = [
        changing(1, upserts("a")),
        changing(2, upserts("x", v=1), size=100),
        changing(3, upserts("x", v=2), size=100),
        changing(4, upserts("x", v=1)),
    ]
    assert select(*pending, max_bytes=50) == ([1], [2, 3, 4])


def test_in_a_batch_a_delete_conflicts_with_any_touch_in_either_order() -> None:
    for earlier, later in [
        (upserts("n"), deletes("n")),
        (deletes("n"), upserts("n")),
        (links("m", "n", "m"), deletes("n", detach=True)),
        (deletes("n", detach=True), links("m", "n", "m")),
        (links("m", "n", "m", "n"), unlinks("m", "n")),
        (unlinks("m", "n"), links("m", "n", "m", "n")),
        (unlinks("m", "n"), unlinks("m", "n")),
        (deletes("n"), deletes("n", detach=True)),
    ]:
        assert select(changing(0, earlier), changing(1, later)) == ([0], [1]), (earlier, later)


def test_in_a_batch_upserts_of_the_same_node_or_edge_go_together() -> None:
    # the graph writer merges them in batch order, so the later plan wins (issue 10)
    same_node = [changing(0, upserts("n")), changing(1, upserts("n"))]
    same_edge = [changing(2, links("m", "n", "m", "n")), changing(3, links("m", "n", "m", "n"))]
    assert select(*same_node, *same_edge) == ([0, 1, 2, 3], [])


def test_an_edge_never_sees_a_node_that_only_a_later_plan_creates() -> None:
    # Issue 11: alone, the edge fails for want of n; in a batch with the upsert it must fail too.
    assert select(changing(0, links("m", "n", "m")), changing(1, upserts("n"))) == ([0], [1])
    # An edge delete names its endpoints too.
    assert select(changing(0, unlinks("m", "n")), changing(1, upserts("n"))) == ([0], [1])
    # The other way round the edge finds n, in a batch as alone.
    assert select(changing(0, upserts("n")), changing(1, links("m", "n", "m"))) == ([0, 1], [])
    # A node an earlier member upserted may be named and upserted again.
    assert select(
        changing(0, upserts("n")), changing(1, links("m", "n", "m")), changing(2, upserts("n"))
    ) == ([0, 1, 2], [])


def test_a_node_delete_never_succeeds_thanks_to_a_later_edge_delete() -> None:
    # Issue 11, the reverse: alone, deleting a linked n fails; a later edge delete must not save it.
    assert select(changing(0, deletes("n")), changing(1, unlinks("m", "n"))) == ([0], [1])
    # The other way round the delete waits for the next batch, where it succeeds as alone.
    assert select(changing(0, unlinks("m", "n")), changing(1, deletes("n"))) == ([0], [1])


def test_the_same_ids_in_another_graph_do_not_conflict() -> None:
    other = GraphOptions(node_label="Other")
    archive = GraphOptions(database="archive")
    pending = [
        changing(0, upserts("n")),
        message(1, "b", mutation=deletes("n"), graph=other),
        message(2, "c", mutation=deletes("n"), graph=archive),
    ]
    assert select(*pending) == ([0, 1, 2], [])


def test_offsets_commit_only_up_to_the_first_message_without_outcome() -> None:
    tracker = OffsetTracker()
    consumed = [message(i, f"d{i}") for i in range(5)] + [message(7, "x", partition=1)]
    tracker.consumed(consumed)
    assert tracker.committable() == {("plans", 0): 0, ("plans", 1): 7}
    tracker.done([consumed[0], consumed[1], consumed[3]])
    assert tracker.committable()[("plans", 0)] == 2
    tracker.done([consumed[2], consumed[4], consumed[5]])
    assert tracker.committable() == {("plans", 0): 5, ("plans", 1): 8}
    tracker.forget([("plans", 1)])
    assert tracker.committable() == {("plans", 0): 5}
