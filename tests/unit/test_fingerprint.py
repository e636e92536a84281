import hashlib
import math
import random
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graph_ingest.domain.errors import FingerprintMismatch
from graph_ingest.domain.fingerprint import (
    NeedsReference,
    canonical_json,
    es6_number,
    fingerprint_of,
    fingerprint_of_typed,
    json_ready,
    reference_canonical_json,
)
from graph_ingest.domain.mutation import EdgeUpsert, NodeUpsert
from graph_ingest.domain.plan import IngestionPlan, Provenance
from tests.unit.plans import plan_for


def reordered(plan: IngestionPlan) -> IngestionPlan:
    m = plan.mutation
    s = plan.next_state
    return plan.model_copy(
        update={
            "mutation": m.model_copy(
                update={
                    "node_upserts": tuple(
                        NodeUpsert(
                            node_id=n.node_id,
                            labels=tuple(reversed(n.labels)),
                            properties=dict(reversed(list(n.properties.items()))),
                        )
                        for n in reversed(m.node_upserts)
                    ),
                    "edge_upserts": tuple(reversed(m.edge_upserts)),
                }
            ),
            "next_state": s.model_copy(
                update={
                    "node_ids": tuple(reversed(s.node_ids)),
                    "edge_keys": tuple(reversed(s.edge_keys)),
                    "fact_sources": tuple(reversed(s.fact_sources)),
                    "committed_at": datetime.now(UTC),
                }
            ),
            "registrations": tuple(reversed(plan.registrations)),
        }
    )


def test_order_of_sets_and_map_keys_does_not_change_the_fingerprint() -> None:
    plan = plan_for("d1")
    assert reordered(plan).computed_fingerprint() == plan.fingerprint


def test_timestamps_and_provenance_do_not_change_the_fingerprint() -> None:
    plan = plan_for("d1")
    later = plan.model_copy(
        update={
            "created_at": plan.created_at + timedelta(days=3),
            "provenance": Provenance(extractor="llm", model="m-2", prompt_version="p9"),
        }
    )
    assert later.computed_fingerprint() == plan.fingerprint


def test_fingerprint_is_versioned_sha256() -> None:
    version, digest = plan_for("d1").fingerprint.split(":")
    assert version == "v1"
    assert len(digest) == 64


@pytest.mark.parametrize(
    "change",
    [
        lambda p: {
            "document_id": "d2",
            "next_state": p.next_state.model_copy(update={"document_id": "d2"}),
        },
        lambda p: {"document_version": "9"},
        lambda p: {"graph": p.graph.model_copy(update={"node_label": "Other"})},
        lambda p: {
            "mutation": p.mutation.model_copy(
                update={
                    "edge_upserts": (
                        *p.mutation.edge_upserts,
                        EdgeUpsert(src="a", type="T", dst="b"),
                    )
                }
            )
        },
        lambda p: {
            "mutation": p.mutation.model_copy(
                update={
                    "node_upserts": (
                        p.mutation.node_upserts[0].model_copy(
                            update={"properties": {"name": "Alicia"}}
                        ),
                        *p.mutation.node_upserts[1:],
                    )
                }
            )
        },
        lambda p: {"mutation": p.mutation.model_copy(update={"detach_deleted_nodes": True})},
        lambda p: {"next_state": p.next_state.model_copy(update={"content_hash": "sha256:other"})},
        lambda p: {"registrations": p.registrations[1:]},
        lambda p: {
            "registrations": (
                p.registrations[0].model_copy(update={"aliases": ("Al",)}),
                *p.registrations[1:],
            )
        },
    ],
    ids=[
        "document",
        "version",
        "routing",
        "edge added",
        "property",
        "detach",
        "state",
        "registration removed",
        "alias",
    ],
)
def test_any_business_change_alters_the_fingerprint(change) -> None:  # type: ignore[no-untyped-def]
    plan = plan_for("d1")
    changed = plan.model_copy(update=change(plan))
    assert changed.computed_fingerprint() != plan.fingerprint
    with pytest.raises(FingerprintMismatch):
        changed.verify_fingerprint()


def test_int_and_float_of_equal_value_are_one_json_number() -> None:
    # RFC 8785 writes 1.0 as 1: a plan decoded from another language keeps its fingerprint.
    plan = plan_for("d1")
    node = plan.mutation.node_upserts[0]
    as_int = plan.model_copy(
        update={
            "mutation": plan.mutation.model_copy(
                update={"node_upserts": (node.model_copy(update={"properties": {"n": 1}}),)}
            )
        }
    )
    as_float = plan.model_copy(
        update={
            "mutation": plan.mutation.model_copy(
                update={"node_upserts": (node.model_copy(update={"properties": {"n": 1.0}}),)}
            )
        }
    )
    assert as_int.computed_fingerprint() == as_float.computed_fingerprint()


# -- the fast canonical writer is the RFC 8785 reference, byte for byte ----------------------


def _random_doubles(count: int) -> list[float]:
    rng = random.Random(8785)
    found: list[float] = []
    while len(found) < count:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(value):
            found.append(value)
    return found


EDGE_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.1, 1e21, 1e20, 9.999999999999999e20, 1e-6, 1e-7, 0.000001,
    1.5e-7, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 2.0**53, 123e-20,
    333333333.33333329, 100.0, 1234567890123456789.0,
]  # fmt: skip


@pytest.mark.parametrize("value", [*EDGE_FLOATS, *_random_doubles(3000)])
def test_a_float_is_written_as_rfc8785_writes_it(value: float) -> None:
    assert es6_number(value).encode() == reference_canonical_json(value)
    assert canonical_json({"x": [value]}) == reference_canonical_json({"x": [value]})


TEXTS = [
    "", "plain", "é ü ß 中文", "emoji 😀 and 𝄞", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
    'quote " backslash \\ slash /', "\u2028\u2029", "\ud7ff\ue000\uffff",
]  # fmt: skip


@pytest.mark.parametrize("text", TEXTS)
def test_text_and_keys_are_written_and_sorted_as_rfc8785_does(text: str) -> None:
    content = {
        text: text,
        "a" + text: [text, {text: 1, "\U0001f600": 2, "\uffff": 3, "z": None}],
        "\ue000": True,
        "\U00010000": False,
    }
    assert canonical_json(content) == reference_canonical_json(content)


@pytest.mark.parametrize("value", [2**53 - 1, -(2**53 - 1), 0, 7])
def test_integers_within_the_safe_range_are_written_as_rfc8785_does(value: int) -> None:
    assert canonical_json({"n": value}) == reference_canonical_json({"n": value})


@pytest.mark.parametrize(
    "content", [{"n": 2**53}, {"n": -(2**53)}, {"n": 2**64}, {"f": math.inf}, {"f": math.nan}]
)
def test_what_rfc8785_refuses_is_refused_with_its_own_error(content: dict[str, object]) -> None:
    with pytest.raises(Exception) as reference:
        reference_canonical_json(content)
    with pytest.raises(type(reference.value)):
        canonical_json(content)


def test_a_plans_business_content_takes_the_fast_writer_and_matches_the_reference() -> None:
    plan = plan_for("doc-floats")
    node = plan.mutation.node_upserts[0]
    floats = node.model_copy(
        update={"properties": {**node.properties, "confidence": 0.93, "tiny": 1e-9}}
    )
    mutation = plan.mutation.model_copy(update={"node_upserts": (floats,)})
    content = plan.model_copy(update={"mutation": mutation}).business_content()
    assert json_ready(content) is not None  # no fallback for ordinary content
    assert canonical_json(content) == reference_canonical_json(content)


def _with_properties(plan: IngestionPlan, node: dict[str, object], edge: dict[str, object]) -> Any:
    m = plan.mutation
    nodes = (m.node_upserts[0].model_copy(update={"properties": node}), *m.node_upserts[1:])
    edges = (m.edge_upserts[0].model_copy(update={"properties": edge}), *m.edge_upserts[1:])
    return plan.model_copy(
        update={"mutation": m.model_copy(update={"node_upserts": nodes, "edge_upserts": edges})}
    )


@pytest.mark.parametrize(
    ("node", "edge"),
    [
        ({"f": value, "l": [value, 1, "x"]}, {"w": -value})
        for value in [*EDGE_FLOATS, *_random_doubles(200)]
    ]
    + [
        ({"t": text, "l": [text, True, None]}, {"t": text, "n": 2**53 - 1, "m": -(2**53 - 1)})
        for text in TEXTS
    ],
)
def test_a_plans_fingerprint_walks_only_its_properties_and_equals_the_reference(
    node: dict[str, object], edge: dict[str, object]
) -> None:
    """computed_fingerprint writes the typed content with orjson, walking only property values:
    byte for byte what the reference writes of the whole content."""
    plan = _with_properties(plan_for("doc-typed"), node, edge)
    reference = reference_canonical_json(plan.business_content())
    assert plan.computed_fingerprint() == "v1:" + hashlib.sha256(reference).hexdigest()


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_property_only_the_reference_can_judge_takes_the_reference(value: float) -> None:
    plan = _with_properties(plan_for("doc-typed"), {"f": value}, {})
    with pytest.raises(Exception) as reference:
        reference_canonical_json(plan.business_content())
    with pytest.raises(type(reference.value)):
        plan.computed_fingerprint()


def test_an_integer_past_the_safe_range_in_typed_content_needs_the_reference() -> None:
    with pytest.raises(NeedsReference):
        fingerprint_of_typed({"rank": 2**53})
    assert fingerprint_of_typed({"rank": 2**53 - 1}) == fingerprint_of({"rank": 2**53 - 1})


@pytest.mark.parametrize("value", [2**53, -(2**60)])
def test_an_integer_past_the_safe_range_in_a_plain_property_map_takes_the_reference(
    value: int,
) -> None:
    """A map of plain values (str, int, bool, None) is not walked: orjson's strict integers catch
    what only the reference can judge, and the reference decides as for any other content."""
    plan = _with_properties(plan_for("doc-typed"), {"n": value, "t": "x"}, {"b": True})
    with pytest.raises(Exception) as reference:
        reference_canonical_json(plan.business_content())
    with pytest.raises(type(reference.value)):
        plan.computed_fingerprint()
