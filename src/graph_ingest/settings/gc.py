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
