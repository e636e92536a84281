"""Builders of plans for unit tests."""

from graph_ingest.demo.samples import Entity, Relation, sample_plan
from graph_ingest.domain.plan import IngestionPlan

ALICE = Entity("Person", "Alice")
ACME = Entity("Company", "Acme")
BERLIN = Entity("City", "Berlin")


def plan_for(document_id: str, text: str = "Alice works at Acme in Berlin.") -> IngestionPlan:
    return sample_plan(
        "unit",
        document_id,
        text,
        [ALICE, ACME, BERLIN],
        [Relation(ALICE, "WORKS_AT", ACME), Relation(ACME, "LOCATED_IN", BERLIN)],
    )
