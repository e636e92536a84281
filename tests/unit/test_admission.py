"""Admission as a pure decision: every verdict, from every stage it can meet."""

from datetime import UTC, datetime

import pytest

from graph_ingest.domain.admission import Verdict, decide, unless_orphaned
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage, check_transition
from graph_ingest.domain.state import CommittedRevision
from tests.unit.plans import plan_for

NOW = datetime(2026, 12, 1, tzinfo=UTC)


BASE = "op-base"


def at_revision(plan: IngestionPlan, expected: int, base: str | None = BASE) -> IngestionPlan:
    """The plan, planned on revision ``expected`` committed by ``base`` (none for revision 0)."""
    base = base if expected else None
    fields = plan.model_dump(exclude={"fingerprint"})
    fields["expected_revision"] = expected
    fields["base_operation_id"] = base
    fields["next_state"]["revision"] = expected + 1
    fields["next_state"]["base_operation_id"] = base
    return IngestionPlan.freeze(**fields)


def operation_of(plan: IngestionPlan, *path: Stage) -> Operation:
    operation = Operation.prepared(
        operation_id=plan.operation_id,
        space=plan.space,
        document_id=plan.document_id,
        expected_revision=plan.expected_revision,
        fingerprint=plan.fingerprint,
        at=NOW,
    )
    for stage in path:
        operation = operation.transition(stage, NOW)
    return operation


def committed(plan: IngestionPlan, revision: int, operation_id: str = BASE) -> CommittedRevision:
    return CommittedRevision(plan.space, plan.document_id, revision, operation_id)


PLAN = at_revision(plan_for("doc-1"), 1)


def walk(operation: Operation, path: tuple[Stage, ...]) -> Stage:
    stage = operation.stage
    for target in path:
        check_transition(stage, target)
        stage = target
    return stage


@pytest.mark.parametrize(
    ("path", "revision", "verdict", "final"),
    [
        ((), 1, Verdict.PROCEED, Stage.PREPARED),
        ((Stage.FAILED,), 1, Verdict.PROCEED, Stage.PREPARED),
        ((Stage.PARKED,), 1, Verdict.PROCEED, Stage.PREPARED),
        ((Stage.DEAD_LETTERED,), 1, Verdict.PROCEED, Stage.PREPARED),
        ((Stage.GRAPH_APPLIED,), 1, Verdict.PROCEED, Stage.GRAPH_APPLIED),
        ((), 2, Verdict.CONFLICT, Stage.CONFLICT),
        ((Stage.GRAPH_APPLIED,), 2, Verdict.CONFLICT, Stage.CONFLICT),
        ((Stage.FAILED,), 5, Verdict.CONFLICT, Stage.CONFLICT),
        ((), 0, Verdict.PARK, Stage.PARKED),
        ((Stage.FAILED,), 0, Verdict.PARK, Stage.PARKED),
        ((Stage.PARKED,), 0, Verdict.PARK, Stage.PARKED),
        (
            (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED),
            2,
            Verdict.DUPLICATE,
            Stage.COMPLETED,
        ),
        ((Stage.CONFLICT,), 7, Verdict.STALE, Stage.CONFLICT),
    ],
)
def test_the_verdict_and_the_path_follow_from_stage_and_revision(
    path: tuple[Stage, ...], revision: int, verdict: Verdict, final: Stage
) -> None:
    operation = operation_of(PLAN, *path)
    state = committed(PLAN, revision) if revision else None
    admission = decide(operation, PLAN, state)
    assert admission.verdict is verdict
    assert walk(operation, admission.path) is final
    assert (admission.reason is not None) == (verdict in (Verdict.CONFLICT, Verdict.PARK))


@pytest.mark.parametrize("path", [(), (Stage.GRAPH_APPLIED,), (Stage.FAILED,), (Stage.PARKED,)])
def test_a_state_committed_by_this_operation_repairs_the_log_up_to_completed(
    path: tuple[Stage, ...],
) -> None:
    operation = operation_of(PLAN, *path)
    admission = decide(operation, PLAN, committed(PLAN, 2, PLAN.operation_id))
    assert admission.verdict is Verdict.REPAIR
    assert walk(operation, admission.path) is Stage.COMPLETED


def test_an_operation_bound_to_another_plan_is_rejected_whatever_its_stage() -> None:
    other = at_revision(plan_for("doc-1", "Alice works at Acme in Paris."), 1)
    operation = operation_of(other).model_copy(update={"operation_id": PLAN.operation_id})
    admission = decide(operation, PLAN, None)
    assert admission.verdict is Verdict.REJECT
    assert admission.path == ()
    assert admission.reason is not None and admission.reason.code == "ALREADY_EXISTS"


@pytest.mark.parametrize("stage", [Stage.PREPARED, Stage.PARKED, Stage.FAILED, Stage.DEAD_LETTERED])
def test_a_plan_whose_base_is_not_the_committed_state_is_a_conflict_never_applied(
    stage: Stage,
) -> None:
    # Given a plan planned on the state committed by op-base, at revision 1
    path = {
        Stage.PREPARED: (),
        Stage.PARKED: (Stage.PARKED,),
        Stage.FAILED: (Stage.FAILED,),
        Stage.DEAD_LETTERED: (Stage.DEAD_LETTERED,),
    }[stage]
    operation = operation_of(PLAN, *path)
    # When revision 1 was committed by another lineage (a plan of the same revision number)
    admission = decide(operation, PLAN, committed(PLAN, 1, "op-of-another-lineage"))
    # Then it is a conflict: replanned on the committed state, never applied on top of it
    assert admission.verdict is Verdict.CONFLICT
    assert admission.path[-1] is Stage.CONFLICT
    assert admission.reason is not None
    assert admission.reason.error_class == "LineageConflict"
    assert "op-of-another-lineage" in admission.reason.message


def test_a_new_document_plan_conflicts_with_any_committed_state_and_proceeds_on_none() -> None:
    new = at_revision(plan_for("doc-1"), 0)
    assert new.base_operation_id is None
    assert decide(operation_of(new), new, None).verdict is Verdict.PROCEED
    assert decide(operation_of(new), new, committed(new, 1)).verdict is Verdict.CONFLICT


def test_a_plan_on_its_own_base_proceeds() -> None:
    assert decide(operation_of(PLAN), PLAN, committed(PLAN, 1, BASE)).verdict is Verdict.PROCEED


def test_a_plan_parked_on_a_base_that_conflicted_conflicts_and_one_on_a_base_to_come_parks() -> (
    None
):
    later = at_revision(plan_for("doc-1"), 2, base="op-v2")
    parked = decide(operation_of(later), later, committed(later, 1))
    assert parked.verdict is Verdict.PARK
    base = operation_of(at_revision(plan_for("doc-1"), 1)).model_copy(
        update={"operation_id": "op-v2"}
    )
    # Given the base is still on its way (admitted, or not yet): the plan parks
    assert unless_orphaned(parked, Stage.PREPARED, later, None) is parked
    assert unless_orphaned(parked, Stage.PREPARED, later, base) is parked
    # When the base conflicted, the state the plan expects never comes: it conflicts
    dead = base.transition(Stage.CONFLICT, NOW)
    orphaned = unless_orphaned(parked, Stage.PARKED, later, dead)
    assert orphaned.verdict is Verdict.CONFLICT
    assert orphaned.path == (Stage.CONFLICT,)
    assert orphaned.reason is not None and "op-v2" in orphaned.reason.message
    # and any other verdict is left as it is
    proceed = decide(operation_of(PLAN), PLAN, committed(PLAN, 1))
    assert unless_orphaned(proceed, Stage.PREPARED, PLAN, dead) is proceed
