from graph_ingest.consumers.batching import OffsetTracker, select_batch
from graph_ingest.consumers.messages import PlanMessage
from graph_ingest.domain.errors import FingerprintMismatch
from graph_ingest.domain.mutation import EdgeKey, Mutation
from tests.unit.plans import plan_for


def message(offset: int, document_id: str | None, partition: int = 0, **plan_update) -> PlanMessage:  # type: ignore[no-untyped-def]
    if document_id is None:
        return PlanMessage(
            "plans", partition, offset, None, b"junk", error=FingerprintMismatch("x")
        )
    plan = plan_for(document_id)
    if plan_update:
        plan = plan.model_copy(update=plan_update)
    return PlanMessage("plans", partition, offset, plan.key.encode(), b"x" * 10, plan=plan)


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
