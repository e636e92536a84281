"""What PostgreSQL and RFC 8785 cannot hold is refused when a plan is built, not at its commit."""

from typing import Any

import pytest
from pydantic import ValidationError

from graph_ingest.domain.limits import MAX_ID_LENGTH, MAX_SAFE_INTEGER
from graph_ingest.domain.plan import IngestionPlan
from tests.unit.plans import plan_for

PLAN = plan_for("doc-1")


def rebuilt(change: Any) -> IngestionPlan:
    fields = PLAN.model_dump(exclude={"fingerprint"})
    change(fields)
    return IngestionPlan.freeze(**fields)


def set_path(fields: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = fields
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[last] = value


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("mutation.edge_upserts.0.rank", MAX_SAFE_INTEGER + 1),
        ("mutation.edge_upserts.0.rank", -(2**60)),
        ("next_state.fact_sources.0.evidence.0.start", 2**60),
        ("expected_revision", 2**31 - 1),
        ("operation_id", "op-\x00"),
        ("document_version", "v\x00"),
        ("mutation.node_upserts.0.node_id", "n\x00"),
        ("mutation.node_upserts.0.node_id", "n" * (MAX_ID_LENGTH + 1)),
        ("next_state.fact_sources.0.evidence.0.quote", "quote\x00"),
        ("registrations.0.aliases", ["Al\x00"]),
        ("next_state.fact_sources.0.fact_id", "é" * 1_100),
        ("registrations.0.normalized_name", "\N{GRINNING FACE}" * 500),
    ],
)
def test_a_value_the_stores_cannot_hold_is_refused(path: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        rebuilt(lambda fields: set_path(fields, path, value))


def test_values_inside_the_limits_are_kept() -> None:
    plan = rebuilt(lambda f: set_path(f, "mutation.edge_upserts.0.rank", MAX_SAFE_INTEGER))
    assert plan.mutation.edge_upserts[0].rank == MAX_SAFE_INTEGER
    plan.verify_fingerprint()
