"""The demo's documents and what must become of them.

``corpus/`` holds a few short notes about the people, teams, systems and projects of a small
company, sharing entities (the Payments Team, the Ledger Service, the Feature Flags...), written
in the phrases the bundled graph schema's ``rules`` recognise. The demo submits them in rounds,
each waiting for the one before:

1. every document, version 1;
2. version 2 of ``team-payments``, which no longer says that the Ledger Service depends on the
   Billing API (nobody else says so: the relation leaves the graph) and adds a member;
3. ``project-atlas`` again, unchanged: a NO_OP (not extracted again, nothing written);
4. a retraction of ``project-beacon``: what only it stated leaves the graph, what other
   documents state too (Dan Okafor, the Feature Flags) stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.request import IngestRequest, RequestKind

CORPUS = Path(__file__).resolve().parent / "corpus"
DOCUMENTS = ("team-payments", "team-platform", "project-atlas", "project-beacon")
UPDATED = "team-payments"
UNCHANGED = "project-atlas"
RETRACTED = "project-beacon"

DROPPED_RELATION = ("Ledger Service", "DEPENDS_ON", "Billing API")
"""Stated by team-payments v1 only; v2 no longer states it."""
RETRACTED_ONLY = ("Project Beacon",)
"""Named by the retracted document alone."""
STILL_SHARED = ("Dan Okafor", "Feature Flags")
"""Named by the retracted document and by another one."""


def arrow(relation: tuple[str, str, str]) -> str:
    """``source -TYPE-> target``: how the demo writes a relation."""
    source, relation_type, target = relation
    return f"{source} -{relation_type}-> {target}"


@dataclass(frozen=True, slots=True)
class Expected:
    """One request the demo submits and the kind of plan it must become (then COMPLETED)."""

    request: IngestRequest
    kind: PlanKind


@dataclass(frozen=True, slots=True)
class Round:
    title: str
    submissions: tuple[Expected, ...]


def demo_rounds(space: str, schema_version: str) -> list[Round]:
    def ingest(
        document_id: str, version: str, batch: str, *, text: str | None = None
    ) -> IngestRequest:
        file = CORPUS / f"{text or document_id}.txt"
        return IngestRequest(
            space=space,
            document_id=document_id,
            document_version=version,
            schema_version=schema_version,
            content=file.read_text(encoding="utf-8"),
            batch_id=batch,  # the unchanged resubmission is a submission of its own
        )

    retraction = IngestRequest(
        kind=RequestKind.RETRACT,
        space=space,
        document_id=RETRACTED,
        document_version="retracted",
        schema_version=schema_version,
        batch_id="round-4",
    )
    return [
        Round(
            "every document, version 1",
            tuple(Expected(ingest(d, "1", "round-1"), PlanKind.INGESTION) for d in DOCUMENTS),
        ),
        Round(
            f"{UPDATED} version 2 (no longer says {arrow(DROPPED_RELATION)})",
            (Expected(ingest(UPDATED, "2", "round-2", text=f"{UPDATED}.v2"), PlanKind.INGESTION),),
        ),
        Round(
            f"{UNCHANGED} again, unchanged",
            (Expected(ingest(UNCHANGED, "1", "round-3"), PlanKind.NO_OP),),
        ),
        Round(f"retract {RETRACTED}", (Expected(retraction, PlanKind.RETRACTION),)),
    ]


__all__ = [
    "CORPUS",
    "DOCUMENTS",
    "DROPPED_RELATION",
    "RETRACTED",
    "RETRACTED_ONLY",
    "STILL_SHARED",
    "UNCHANGED",
    "UPDATED",
    "Expected",
    "Round",
    "arrow",
    "demo_rounds",
]
