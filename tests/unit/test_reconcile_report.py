"""Rendering a reconcile result (pure)."""

import json

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.reconcile.drift import Drift
from graph_ingest.reconcile.report import render_text, to_json
from graph_ingest.reconcile.service import (
    ReconcileResult,
    RepairOutcome,
    RepairStatus,
    ScanReport,
    Unchecked,
    UnlistedNode,
)

EDGE = EdgeKey(src="a", type="KNOWS", dst="b")
DRIFT = Drift("s", "doc-1", 3, "op_1", missing_nodes=("n1", "n2"), missing_edges=(EDGE,))


def test_a_clean_scan_says_so_in_one_line() -> None:
    result = ReconcileResult(ScanReport(checked=7))
    assert render_text(result) == "checked 7 document(s): no drift"
    assert to_json(result) == {
        "drift": False,
        "scan": {
            "checked": 7,
            "drifted": 0,
            "changed_while_checked": 0,
            "documents": [],
            "unreferenced_nodes": [],
            "unchecked": [],
        },
        "repairs": [],
        "rescan": None,
    }


def test_unreferenced_nodes_are_drift_listed_by_their_first_ids() -> None:
    nodes = tuple(UnlistedNode("neo4j", "Entity", f"n{i}") for i in range(5))
    result = ReconcileResult(ScanReport(checked=2, unlisted_nodes=nodes))
    lines = render_text(result).splitlines()
    assert lines[0] == "unreferenced node n0 in neo4j:Entity (no document lists it)"
    assert lines[3] == "… 2 more unreferenced node(s)"
    assert lines[-1] == "checked 2 document(s): no drift; 5 unreferenced node(s) in the graph"
    data = to_json(result)
    assert data["drift"] is True
    assert data["scan"]["unreferenced_nodes"][4] == {
        "database": "neo4j",
        "node_label": "Entity",
        "node_id": "n4",
    }


def test_one_line_per_drifted_document_with_counts_and_first_ids() -> None:
    many = Drift("s", "doc-2", 1, "op_2", unexpected_edges=(EDGE,), in_flight=("op_9",))
    text = render_text(ReconcileResult(ScanReport(checked=5, drifts=(DRIFT, many), moved_on=1)))
    header, first, second, summary = text.splitlines()
    assert header.split()[:3] == ["DOCUMENT", "REV", "MISSING"]
    assert first.split()[:5] == ["s/doc-1", "3", "2", "1", "0"]
    assert "node n1, node n2, edge (a)-[:KNOWS#0]->(b)" in first
    assert second.split()[:5] == ["s/doc-2", "1", "0", "0", "1"]
    assert "unexpected (a)-[:KNOWS#0]->(b) (in flight: op_9)" in second
    assert summary == (
        "checked 5 document(s): 2 drifted (2 missing node(s), 1 missing edge(s), "
        "1 unexpected edge(s)); 1 changed while checked (not reported; run again)"
    )


def test_only_the_first_ids_are_shown() -> None:
    drift = Drift("s", "d", 1, "op", missing_nodes=tuple(f"n{i}" for i in range(10)))
    text = render_text(ReconcileResult(ScanReport(checked=1, drifts=(drift,))))
    assert "node n0, node n1, node n2, … 7 more" in text
    assert "n3" not in text


def test_unchecked_documents_count_as_drift() -> None:
    unchecked = Unchecked("s", "d", 2, "op", "its operation's frozen plan is missing")
    scan = ScanReport(checked=0, unchecked=(unchecked,))
    assert scan.has_drift
    assert "unchecked s/d (revision 2): its operation's frozen plan is missing" in render_text(
        ReconcileResult(scan)
    )


def test_repair_result_shows_outcomes_and_the_scan_after() -> None:
    result = ReconcileResult(
        ScanReport(checked=2, drifts=(DRIFT,)),
        (RepairOutcome("s", "doc-1", RepairStatus.REPAIRED, "re-applied from plan op_1", 2, 1, 0),),
        ScanReport(checked=2),
    )
    text = render_text(result)
    assert (
        "repaired s/doc-1: restored 2 node(s) and 1 edge(s), removed 0 edge(s) "
        "(re-applied from plan op_1)"
    ) in text
    assert text.endswith("after repair:\nchecked 2 document(s): no drift")
    document = json.loads(json.dumps(to_json(result)))
    assert document["drift"] is False
    assert document["scan"]["documents"][0]["missing_edges"] == [
        {"src": "a", "type": "KNOWS", "dst": "b", "rank": 0}
    ]
    assert document["repairs"][0]["status"] == "REPAIRED"
    assert document["rescan"]["drifted"] == 0
