"""The planner's decisions over a fake store view: NO_OP, diff, stale edges, retraction, order."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from graph_ingest.domain.candidates import (
    CandidateEvidence,
    EntityCandidate,
    Extraction,
    ExtractionIssue,
)
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.request import (
    IngestOptions,
    IngestRequest,
    RequestKind,
    StaleRelationPolicy,
)
from graph_ingest.domain.state import FactKind, fact_id_of
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.planner import Planner
from graph_ingest.planning.rules import RulesExtractor
from graph_ingest.settings.planner import PlannerSettings
from tests.unit.planning_fakes import T0, CountingExtractor, FakeView, example_schema, request

pytestmark = pytest.mark.timeout(30)

DOC_A = "Bob is a member of the Payments Team. The Payments Team owns the Ledger Service."
DOC_A_V2 = "Bob is a member of the Payments Team. Carol works on Project Atlas."
DOC_B = "The Payments Team owns the Ledger Service."
SETTINGS = PlannerSettings()


def planner(
    view: FakeView, schema: GraphSchema | None = None, **kwargs: Any
) -> tuple[Planner, CountingExtractor]:
    used = schema or example_schema()
    rules = CountingExtractor(RulesExtractor(used))
    return Planner(used, {"rules": rules}, view, SETTINGS, clock=lambda: T0, **kwargs), rules


def person_opening(document_id: str, text: str, name: str) -> EntityCandidate:
    """A Person candidate for ``name``, which ``text`` starts with, quoted from its first chunk."""
    assert text.startswith(name)
    chunk = chunk_document(document_id, text, max_chars=SETTINGS.chunk_max_chars)[0]
    evidence = CandidateEvidence(chunk_id=chunk.chunk_id, quote=name, start=0, end=len(name))
    return EntityCandidate(entity_type="Person", name=name, evidence=(evidence,))


def carol_only_v2(policy: StaleRelationPolicy) -> IngestRequest:
    """Version 2 of document a, which says only that Carol works on Project Atlas."""
    return request(
        "a",
        "Carol works on Project Atlas.",
        document_version="2",
        options=IngestOptions(stale_relation_policy=policy),
    )


def edge_types(keys: Any) -> set[str]:
    return {k.type for k in keys}


def test_a_new_document_becomes_an_ingestion_plan_with_facts_and_registrations() -> None:
    view = FakeView()
    p, rules = planner(view)

    plan = p.plan(request("a", DOC_A, source_updated_at=T0))

    assert (plan.kind, plan.expected_revision, rules.calls) == (PlanKind.INGESTION, 0, 1)
    names = {n.properties["name"]: n for n in plan.mutation.node_upserts}
    assert set(names) == {"Bob Stone", "Payments Team", "Ledger Service"}
    assert names["Ledger Service"].labels == ("System",)
    assert names["Ledger Service"].properties["tier"] == "critical"
    assert edge_types(plan.mutation.upserted_edge_keys()) == {"MEMBER_OF", "OWNS"}
    state = plan.next_state
    assert state.revision == 1
    assert state.content_hash == content_hash(DOC_A)
    assert (state.schema_version, state.source_updated_at) == ("2026-12-01", T0)
    assert state.extraction_fingerprint is not None
    assert set(state.node_ids) == set(plan.mutation.upserted_node_ids())
    assert set(state.edge_keys) == plan.mutation.upserted_edge_keys()
    facts = {f.fact_id: f for f in state.fact_sources}
    assert set(facts) == set(state.node_ids) | {fact_id_of(k) for k in state.edge_keys}
    for fact in facts.values():
        assert fact.evidence
        assert all(DOC_A[e.start : e.end] == e.quote for e in fact.evidence)
    owns = next(k for k in state.edge_keys if k.type == "OWNS")
    assert facts[fact_id_of(owns)].kind is FactKind.EDGE
    assert facts[fact_id_of(owns)].evidence[0].quote == "Payments Team owns the Ledger Service"
    registered = {(r.entity_type, r.normalized_name) for r in plan.registrations}
    assert ("Person", "bob") in registered  # the alias, bound on its own
    assert plan.provenance.extractor == "rules"
    plan.verify_fingerprint()


def test_the_same_request_on_the_same_state_is_the_same_plan() -> None:
    first, _ = planner(FakeView())
    second, _ = planner(FakeView())

    a, b = first.plan(request("a", DOC_A)), second.plan(request("a", DOC_A))

    assert (a.fingerprint, a.operation_id) == (b.fingerprint, b.operation_id)


def test_an_unchanged_resubmission_is_a_no_op_without_extraction() -> None:
    view = FakeView()
    p, rules = planner(view)
    first = p.plan(request("a", DOC_A))
    view.commit(first)

    again = p.plan(request("a", DOC_A, source_updated_at=T0))

    assert (again.kind, again.expected_revision, rules.calls) == (PlanKind.NO_OP, 1, 1)
    assert again.mutation.is_empty
    assert again.operation_id != first.operation_id
    # a NO_OP changes nothing: its next state is the state it was planned on, as committed
    assert again.base_operation_id == first.operation_id
    assert again.next_state == first.next_state
    assert not again.changes_state


@pytest.mark.parametrize(
    ("text", "change"),
    [
        (DOC_A + " ", {}),
        (DOC_A, {"document_version": "2"}),
        (DOC_A, {"options": IngestOptions(re_extract_unchanged=True)}),
    ],
)
def test_a_change_or_re_extract_unchanged_extracts_again(text: str, change: dict[str, Any]) -> None:
    view = FakeView()
    p, rules = planner(view)
    view.commit(p.plan(request("a", DOC_A)))

    again = p.plan(request("a", text, **change))

    assert (again.kind, again.expected_revision, rules.calls) == (PlanKind.INGESTION, 1, 2)


def test_another_schema_version_or_rule_set_changes_the_fingerprint_and_re_extracts() -> None:
    view = FakeView()
    p, _ = planner(view)
    view.commit(p.plan(request("a", DOC_A)))
    newer, rules = planner(view, example_schema("2027-01-01"))

    plan = newer.plan(request("a", DOC_A, schema_version="2027-01-01"))

    assert (plan.kind, plan.next_state.revision, rules.calls) == (PlanKind.INGESTION, 2, 1)
    assert plan.next_state.schema_version == "2027-01-01"
    with pytest.raises(PlanningError, match="plans with '2027-01-01'") as raised:
        newer.plan(request("a", DOC_A))
    assert raised.value.code is StatusCode.FAILED_PRECONDITION


def test_versions_faster_than_they_apply_are_planned_on_the_planned_state() -> None:
    view = FakeView()
    p, _ = planner(view)

    v1 = p.plan(request("a", DOC_A, document_version="1"))
    v2 = p.plan(request("a", DOC_A_V2, document_version="2"))
    v3 = p.plan(request("a", DOC_A, document_version="3"))

    assert [v.expected_revision for v in (v1, v2, v3)] == [0, 1, 2]
    # v3 diffs against v2's planned state: the edge v2 dropped comes back, v2's edges go stale
    assert edge_types(v3.next_state.superseded_edge_keys) == {"WORKS_ON"}
    # once forgotten (partition revoked), the committed state is the base again
    p.forget([("kb", "a")])
    assert p.plan(request("a", DOC_A_V2, document_version="4")).expected_revision == 0


def test_the_planned_state_is_dropped_once_the_committed_one_caught_up() -> None:
    view = FakeView()
    p, _ = planner(view)
    view.commit(p.plan(request("a", DOC_A)))

    assert p.plan(request("a", DOC_A_V2, document_version="2")).expected_revision == 1
    assert len(p.planned) == 1  # v1 (committed) forgotten, v2 remembered
    view.states[("kb", "a")] = view.states[("kb", "a")].model_copy(update={"revision": 5})
    assert p.plan(request("a", DOC_A, document_version="3")).expected_revision == 5


def test_stale_edges_are_superseded_and_deleted_only_when_unreferenced() -> None:
    view = FakeView()
    p, _ = planner(view)
    a1 = p.plan(request("a", DOC_A))
    view.commit(a1)
    owns = next(k for k in a1.next_state.edge_keys if k.type == "OWNS")
    member = next(k for k in a1.next_state.edge_keys if k.type == "MEMBER_OF")

    dropped = p.plan(request("a", "Carol works on Project Atlas.", document_version="2"))
    p.forget([("kb", "a")])
    kept = p.plan(carol_only_v2(StaleRelationPolicy.KEEP))

    assert set(dropped.next_state.superseded_edge_keys) == {owns, member}
    assert set(dropped.mutation.edge_deletes) == {owns, member}
    # KEEP keeps them as the document's: reconcile expects them, nothing deletes them
    assert kept.next_state.superseded_edge_keys == ()
    assert set(kept.next_state.kept_edge_keys) == {owns, member}
    assert {owns.src, owns.dst, member.src, member.dst} <= set(kept.next_state.node_ids)
    assert kept.mutation.edge_deletes == ()


def test_a_stale_edge_another_document_lists_is_kept_committed_or_planned() -> None:
    view = FakeView()
    p, _ = planner(view)
    view.commit(p.plan(request("a", DOC_A)))
    b = p.plan(request("b", DOC_B))  # planned, not committed
    owns = next(k for k in b.next_state.edge_keys if k.type == "OWNS")

    update = p.plan(request("a", "Bob is a member of the Payments Team.", document_version="2"))

    assert owns in update.next_state.superseded_edge_keys
    assert owns not in update.mutation.edge_deletes  # b's planned state still lists it
    view.commit(b)
    p.forget([("kb", "a"), ("kb", "b")])
    again = p.plan(request("a", "Bob is a member of the Payments Team.", document_version="2"))
    assert owns not in again.mutation.edge_deletes  # b's committed state lists it


def test_a_retraction_deletes_what_no_other_document_lists() -> None:
    view = FakeView()
    p, _ = planner(view)
    a = p.plan(request("a", DOC_A))
    b = p.plan(request("b", DOC_B))
    view.commit(a)
    view.commit(b)
    p.forget([("kb", "a"), ("kb", "b")])

    retract_b = p.plan(request("b", None, kind=RequestKind.RETRACT))

    assert retract_b.kind is PlanKind.RETRACTION
    assert (retract_b.mutation.edge_deletes, retract_b.mutation.node_deletes) == ((), ())
    assert retract_b.next_state.node_ids == () and retract_b.next_state.edge_keys == ()
    assert set(retract_b.next_state.superseded_edge_keys) == set(b.next_state.edge_keys)
    view.commit(retract_b)
    retract_a = p.plan(request("a", None, kind=RequestKind.RETRACT))
    assert set(retract_a.mutation.edge_deletes) == set(a.next_state.edge_keys)
    assert set(retract_a.mutation.node_deletes) == set(a.next_state.node_ids)
    assert retract_a.mutation.detach_deleted_nodes
    assert retract_a.registrations == ()
    # a retracted document is not unchanged: the same content ingests again
    view.commit(retract_a)
    assert p.plan(request("a", DOC_A)).kind is PlanKind.INGESTION


def test_retracting_a_document_never_ingested_is_not_found() -> None:
    p, _ = planner(FakeView())

    with pytest.raises(PlanningError, match="nothing to retract") as raised:
        p.plan(request("ghost", None, kind=RequestKind.RETRACT))
    assert raised.value.code is StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        ({"source_updated_at": T0 - timedelta(seconds=1)}, "source_updated_at .* is older"),
        ({"document_version": "v9"}, "document version 'v9' is older than 'v10'"),
        ({"document_version": "1.9.1"}, "older"),
        ({"kind": RequestKind.RETRACT, "document_version": "3"}, "older"),
    ],
)
def test_an_out_of_order_version_is_rejected_with_its_reason(
    second: dict[str, Any], reason: str
) -> None:
    view = FakeView()
    p, _ = planner(view)
    view.commit(p.plan(request("a", DOC_A, document_version="v10", source_updated_at=T0)))

    with pytest.raises(PlanningError, match=f"out of order: .*{reason}") as raised:
        p.plan(request("a", DOC_A_V2, **{"document_version": "v10", **second}))
    assert raised.value.code is StatusCode.FAILED_PRECONDITION


def test_versions_that_do_not_compare_are_not_ordered() -> None:
    view = FakeView()
    p, _ = planner(view)
    view.commit(p.plan(request("a", DOC_A, document_version="2026-12-01T09:00")))

    plan = p.plan(request("a", DOC_A_V2, document_version="draft"))

    assert plan.kind is PlanKind.INGESTION


def test_precomputed_candidates_are_used_instead_of_the_extractor() -> None:
    text = "Dana Lee joined."
    dana = person_opening("a", text, "Dana Lee")
    view = FakeView()
    p, rules = planner(view)

    plan = p.plan(request("a", text, candidates=Extraction(entities=(dana,))))
    view.commit(plan)
    again = p.plan(request("a", text, candidates=Extraction(entities=(dana,))))

    assert rules.calls == 0
    assert plan.provenance.extractor == "precomputed"
    assert [n.properties["name"] for n in plan.mutation.node_upserts] == ["Dana Lee"]
    assert again.kind is PlanKind.NO_OP


def test_issues_are_reported_and_under_the_fail_policy_fail_the_document() -> None:
    text = "Erin joined."
    bad = EntityCandidate(entity_type="Robot", name="R2", evidence=())
    reported: list[tuple[IngestRequest, list[ExtractionIssue]]] = []
    p, _ = planner(FakeView(), on_issues=lambda r, issues: reported.append((r, list(issues))))

    plan = p.plan(request("a", text, candidates=Extraction(entities=(bad,))))
    with pytest.raises(PlanningError, match="UNKNOWN_NODE_TYPE"):
        p.plan(
            request(
                "b",
                text,
                candidates=Extraction(entities=(bad,)),
                options=IngestOptions(fail_on_extraction_error=True),
            )
        )

    assert plan.mutation.is_empty and plan.kind is PlanKind.INGESTION
    assert [(r.document_id, [i.code for i in issues]) for r, issues in reported] == [
        ("a", ["UNKNOWN_NODE_TYPE"])
    ]


def test_a_planned_request_carries_the_issues_its_plan_was_made_with() -> None:
    text = "Erin joined."
    bad = EntityCandidate(entity_type="Robot", name="R2", evidence=())
    erin = person_opening("a", text, "Erin")
    view = FakeView()
    p, _ = planner(view)

    planned = p.plan_request(request("a", text, candidates=Extraction(entities=(bad, erin))))
    view.commit(planned.plan)
    again = p.plan_request(request("a", text, candidates=Extraction(entities=(bad, erin))))
    retraction = p.plan_request(request("a", None, kind=RequestKind.RETRACT))

    assert [n.properties["name"] for n in planned.plan.mutation.node_upserts] == ["Erin"]
    assert [(i.code, i.message) for i in planned.issues] == [
        ("UNKNOWN_NODE_TYPE", "entity Robot 'R2': node type 'Robot' is not declared")
    ]
    # nothing is extracted again for an unchanged document, nor for a retraction
    assert (again.plan.kind, again.issues) == (PlanKind.NO_OP, ())
    assert (retraction.plan.kind, retraction.issues) == (PlanKind.RETRACTION, ())


def test_content_by_reference_is_read_and_checked_against_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(DOC_B, encoding="utf-8")
    p, _ = planner(FakeView())

    plan = p.plan(request("a", None, content_ref=path.as_uri(), content_hash=content_hash(DOC_B)))
    assert plan.next_state.content_hash == content_hash(DOC_B)

    with pytest.raises(PlanningError, match="does not match content_hash"):
        p.plan(request("b", None, content_ref=path.as_uri(), content_hash=content_hash("x")))
    with pytest.raises(PlanningError, match="only file://"):
        p.plan(request("c", None, content_ref="s3://bucket/doc", content_hash="sha256:0"))
    with pytest.raises(PlanningError, match="cannot read") as raised:
        missing = (tmp_path / "missing.txt").as_uri()
        p.plan(request("d", None, content_ref=missing, content_hash="sha256:0"))
    assert raised.value.code is StatusCode.UNAVAILABLE
    with pytest.raises(PlanningError, match="is not the hash of the content"):
        p.plan(request("e", DOC_B, content_hash=content_hash("other")))


def test_a_plan_that_does_not_validate_is_a_planning_error() -> None:
    p, _ = planner(FakeView())
    long_id = "\U00020000" * 512  # 4 bytes each in UTF-8: with a fact id, past the index limit

    with pytest.raises(PlanningError, match="the plan fails validation") as raised:
        p.plan(request(long_id, DOC_A))
    assert raised.value.code is StatusCode.INVALID_ARGUMENT
    assert "at most 2000 can be indexed" in str(raised.value)


def test_an_extracted_property_holding_a_nul_is_a_planning_error_naming_it() -> None:
    text = "Dana Lee joined."
    dana = person_opening("a", text, "Dana Lee").model_copy(
        update={"properties": {"role": "lead\x00"}}
    )
    p, _ = planner(FakeView())

    with pytest.raises(PlanningError, match="property 'role': a NUL character") as raised:
        p.plan(request("a", text, candidates=Extraction(entities=(dana,))))
    assert raised.value.code is StatusCode.INVALID_ARGUMENT


def test_the_configured_extractor_must_exist() -> None:
    with pytest.raises(ConfigurationError, match=r"planner\.extractor 'llm'"):
        Planner(example_schema(), {}, FakeView(), PlannerSettings(extractor="llm"))


def test_a_node_an_update_no_longer_mentions_is_deleted_unless_another_document_lists_it() -> None:
    # Given document a mentions Bob, the Payments Team and the Ledger Service; b lists the team
    view = FakeView()
    p, _ = planner(view)
    a1 = p.plan(request("a", DOC_A))
    view.commit(a1)
    view.commit(p.plan(request("b", "Alice is a member of the Payments Team.")))
    # When a's next version no longer mentions any of them
    a2 = p.plan(request("a", "Carol works on Project Atlas.", document_version="2"))
    # Then the nodes only a listed are deleted (with what still touches them), the team is not
    gone = set(a1.next_state.node_ids) - set(a2.next_state.node_ids)
    team = next(k.dst for k in a1.next_state.edge_keys if k.type == "MEMBER_OF")
    assert team in gone
    assert set(a2.mutation.node_deletes) == gone - {team}
    assert a2.mutation.detach_deleted_nodes
    # and a KEEP update keeps the endpoints of the edges it keeps
    p.forget([("kb", "a")])
    kept = p.plan(carol_only_v2(StaleRelationPolicy.KEEP))
    assert kept.mutation.node_deletes == ()
    assert gone <= set(kept.next_state.node_ids)


def test_each_plan_names_the_state_it_was_planned_on() -> None:
    view = FakeView()
    p, _ = planner(view)
    v1 = p.plan(request("a", DOC_A))
    v2 = p.plan(request("a", DOC_A_V2, document_version="2"))  # on v1's planned state
    assert (v1.base_operation_id, v2.base_operation_id) == (None, v1.operation_id)
    # When the planner forgets and plans again on the committed state (none yet)
    p.forget([("kb", "a")])
    v3 = p.plan(request("a", DOC_A_V2, document_version="3"))
    # Then v3 is bound to no state: it and v1 cannot both commit revision 1 onto nothing
    assert (v3.expected_revision, v3.base_operation_id) == (0, None)
    assert v3.operation_id != v1.operation_id
