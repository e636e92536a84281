"""The worker processes' garbage collector (``GRAPH_INGEST_GC__*``): how often it looks for
cycles among young objects."""

from __future__ import annotations

from pydantic import Field

from graph_ingest.settings.section import Section


class GcSettings(Section):
    young_threshold: int = Field(
        default=50_000,
        ge=1,
        description="a worker collects its young objects once this many more have been allocated"
        " than freed (Python's threshold0: 700). A batch of decoded plans is tens of thousands of"
        " objects alive for the batch; at 700, collections rescan it again and again and promote"
        " it to the old generations, whose full passes then took about a tenth of an"
        " applier's CPU (issue 20). At 50,000 reference counting frees most of a plan's objects"
        " first; garbage in cycles waits at most that many allocations longer",
    )
    idle_collect_min: int = Field(
        default=2_000,
        ge=0,
        description="when the applier has nothing to apply and is about to wait for plans, it"
        " collects its young objects if at least this many are pending (0: never). Under a"
        " trickle the young generation fills with the Neo4j driver's garbage in cycles (~110"
        " objects per transaction) and is collected by young_threshold in one pause of 50,000"
        " objects, 18-75 ms on this machine kind, which the plan that arrives then waits out"
        " (issue 20). Collected while idle, a pause is 1-2.5 ms and falls between plans; under"
        " a backlog the applier is never idle and young_threshold alone decides",
    )
