from datetime import UTC, datetime, timedelta

import pytest

from graph_ingest.domain.errors import FingerprintMismatch
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
