"""Builders of plans for unit tests."""

from datetime import UTC, datetime

from graph_ingest.domain.operation import Operation
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.stages import Stage
from tests.samples import Entity, Relation, sample_plan

ALICE = Entity("Person", "Alice")
ACME = Entity("Company", "Acme")
BERLIN = Entity("City", "Berlin")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def plan_for(document_id: str, text: str = "Alice works at Acme in Berlin.") -> IngestionPlan:
    return sample_plan(
        "unit",
        document_id,
        text,
        [ALICE, ACME, BERLIN],
        [Relation(ALICE, "WORKS_AT", ACME), Relation(ACME, "LOCATED_IN", BERLIN)],
    )


def operation_of(plan: IngestionPlan, stage: Stage, at: datetime = T0) -> Operation:
    """The operation bound to ``plan``, in ``stage`` since ``at``."""
    return Operation.prepared(
        operation_id=plan.operation_id,
        space=plan.space,
        document_id=plan.document_id,
        expected_revision=plan.expected_revision,
        fingerprint=plan.fingerprint,
        at=at,
    ).model_copy(update={"stage": stage, "updated_at": at})
