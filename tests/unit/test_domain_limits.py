"""What PostgreSQL and RFC 8785 cannot hold is refused when a plan is built, not at its commit."""

from typing import Any

import pytest
from pydantic import ValidationError

from graph_ingest.domain.limits import MAX_ID_LENGTH, MAX_SAFE_INTEGER, check_index_key
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
        ("mutation.node_upserts.0.properties.name", "Al\x00ice"),
        ("mutation.edge_upserts.0.properties.tags", ["ok", "b\x00d"]),
        ("mutation.node_upserts.0.properties.big", MAX_SAFE_INTEGER + 1),
        ("mutation.edge_upserts.0.properties.big", [1, -(2**60)]),
        ("next_state.fact_sources.0.fact_id", "é" * 1_100),
        ("registrations.0.normalized_name", "\N{GRINNING FACE}" * 500),
    ],
)
def test_a_value_the_stores_cannot_hold_is_refused(path: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        rebuilt(lambda fields: set_path(fields, path, value))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("mutation.node_upserts.0.properties.role", "x\x00"),
        ("mutation.edge_upserts.0.properties.role", [1, "x\x00"]),
    ],
)
def test_a_nul_in_a_property_value_is_refused_naming_the_property(path: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=r"property 'role': a NUL character"):
        rebuilt(lambda fields: set_path(fields, path, value))


def test_values_inside_the_limits_are_kept() -> None:
    plan = rebuilt(lambda f: set_path(f, "mutation.edge_upserts.0.rank", MAX_SAFE_INTEGER))
    assert plan.mutation.edge_upserts[0].rank == MAX_SAFE_INTEGER
    plan.verify_fingerprint()


@pytest.mark.parametrize(
    ("parts", "fits"),
    [
        (("\N{GRINNING FACE}" * 500,), True),  # 2,000 bytes: fits without being encoded
        (("a", "\N{GRINNING FACE}" * 500), False),  # 2,001 bytes
        (("é" * 1_000,), True),  # 1,000 characters, 2,000 bytes
        (("é" * 1_000, "a"), False),
        (("a" * 2_000,), True),
        (("a" * 1_000, "b" * 1_001), False),
    ],
)
def test_an_index_key_is_measured_in_utf8_bytes(parts: tuple[str, ...], fits: bool) -> None:
    if fits:
        check_index_key("key", *parts, shown=parts[0])
        return
    with pytest.raises(ValueError, match=r"key '.{0,80}' is 20\d\d bytes in UTF-8; at most 2000"):
        check_index_key("key", *parts, shown=parts[0])


def test_a_registry_key_past_the_index_limit_is_refused_naming_it() -> None:
    # 500 four-byte characters fit a stored id (512) but not, with the space and type, an index.
    name = "\N{GRINNING FACE}" * 500

    with pytest.raises(ValidationError, match=r"registry name '.{0,80}' is 20\d\d bytes in UTF-8"):
        rebuilt(lambda fields: set_path(fields, "registrations.1.normalized_name", name))
