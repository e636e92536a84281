"""Rendering a reconcile result: a table for people, a JSON document for scripts (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.reconcile.drift import Drift
from graph_ingest.reconcile.service import ReconcileResult, RepairOutcome, ScanReport

EXAMPLES = 3  # ids shown per kind of drift in the table

_HEADERS = ("DOCUMENT", "REV", "MISSING NODES", "MISSING EDGES", "UNEXPECTED", "FIRST IDS")


def render_text(result: ReconcileResult) -> str:
    lines = _scan_lines(result.scan)
    if result.rescan is not None:
        lines.append("")
        lines += [_repair_line(outcome) for outcome in result.repairs]
        lines += ["", "after repair:", *_scan_lines(result.rescan)]
    return "\n".join(lines)


def _scan_lines(scan: ScanReport) -> list[str]:
    lines = []
    if scan.drifts:
        rows = [_HEADERS, *(_row(d) for d in scan.drifts)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS) - 1)]
        for row in rows:
            cells = [
                cell.rjust(width) if 0 < i < len(widths) else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=False))
            ]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
    lines += [
        f"unchecked {u.space}/{u.document_id} (revision {u.revision}): {u.reason}"
        for u in scan.unchecked
    ]
    lines += [
        f"unreferenced node {n.node_id} in {n.database}:{n.node_label} (no document lists it)"
        for n in scan.unlisted_nodes[:EXAMPLES]
    ]
    if len(scan.unlisted_nodes) > EXAMPLES:
        lines.append(f"… {len(scan.unlisted_nodes) - EXAMPLES} more unreferenced node(s)")
    lines.append(_summary(scan))
    return lines


def _row(drift: Drift) -> tuple[str, ...]:
    examples = [
        *(f"node {n}" for n in drift.missing_nodes[:EXAMPLES]),
        *(f"edge {k}" for k in drift.missing_edges[:EXAMPLES]),
        *(f"unexpected {k}" for k in drift.unexpected_edges[:EXAMPLES]),
    ]
    more = (
        len(drift.missing_nodes)
        + len(drift.missing_edges)
        + len(drift.unexpected_edges)
        - len(examples)
    )
    first = ", ".join(examples) + (f", … {more} more" if more > 0 else "")
    if drift.in_flight:
        first += f" (in flight: {', '.join(drift.in_flight)})"
    return (
        f"{drift.space}/{drift.document_id}",
        str(drift.revision),
        str(len(drift.missing_nodes)),
        str(len(drift.missing_edges)),
        str(len(drift.unexpected_edges)),
        first,
    )


def _summary(scan: ScanReport) -> str:
    text = f"checked {scan.checked} document(s): "
    if scan.drifts:
        text += (
            f"{len(scan.drifts)} drifted ("
            f"{sum(len(d.missing_nodes) for d in scan.drifts)} missing node(s), "
            f"{sum(len(d.missing_edges) for d in scan.drifts)} missing edge(s), "
            f"{sum(len(d.unexpected_edges) for d in scan.drifts)} unexpected edge(s))"
        )
    else:
        text += "no drift"
    if scan.unchecked:
        text += f"; {len(scan.unchecked)} could not be checked"
    if scan.unlisted_nodes:
        text += f"; {len(scan.unlisted_nodes)} unreferenced node(s) in the graph"
    if scan.moved_on:
        text += f"; {scan.moved_on} changed while checked (not reported; run again)"
    return text


def _repair_line(outcome: RepairOutcome) -> str:
    name = f"{outcome.space}/{outcome.document_id}"
    counts = (
        f": restored {outcome.restored_nodes} node(s) and {outcome.restored_edges} edge(s), "
        f"removed {outcome.removed_edges} edge(s)"
        if outcome.status == "REPAIRED"
        else ""
    )
    return f"{outcome.status.lower()} {name}{counts} ({outcome.detail})"


# -- JSON --------------------------------------------------------------------------------------


def to_json(result: ReconcileResult) -> dict[str, Any]:
    """``drift``: drift is left at the end (the exit code says the same)."""
    return {
        "drift": result.final.has_drift,
        "scan": _scan_json(result.scan),
        "repairs": [_repair_json(o) for o in result.repairs],
        "rescan": None if result.rescan is None else _scan_json(result.rescan),
    }


def _edges(keys: Sequence[EdgeKey]) -> list[dict[str, Any]]:
    return [key.model_dump(mode="json") for key in keys]


def _scan_json(scan: ScanReport) -> dict[str, Any]:
    return {
        "checked": scan.checked,
        "drifted": len(scan.drifts),
        "changed_while_checked": scan.moved_on,
        "documents": [
            {
                "space": d.space,
                "document_id": d.document_id,
                "revision": d.revision,
                "operation_id": d.operation_id,
                "missing_nodes": list(d.missing_nodes),
                "missing_edges": _edges(d.missing_edges),
                "unexpected_edges": _edges(d.unexpected_edges),
                "in_flight": list(d.in_flight),
            }
            for d in scan.drifts
        ],
        "unreferenced_nodes": [
            {"database": n.database, "node_label": n.node_label, "node_id": n.node_id}
            for n in scan.unlisted_nodes
        ],
        "unchecked": [
            {
                "space": u.space,
                "document_id": u.document_id,
                "revision": u.revision,
                "operation_id": u.operation_id,
                "reason": u.reason,
            }
            for u in scan.unchecked
        ],
    }


def _repair_json(outcome: RepairOutcome) -> dict[str, Any]:
    return {
        "space": outcome.space,
        "document_id": outcome.document_id,
        "status": outcome.status.value,
        "detail": outcome.detail,
        "restored_nodes": outcome.restored_nodes,
        "restored_edges": outcome.restored_edges,
        "removed_edges": outcome.removed_edges,
    }
