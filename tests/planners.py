"""A test-only RequestPlanner: real frozen plans from a request's candidates or its words.

It stands in for the real planner (built in parallel), so the worker, the CLI and the crash tests
exercise everything around planning with real plans. Markers in the content make it fail:
``PERMANENT`` raises PlanningError; ``TRANSIENT <n> [AFTER <s>]`` raises ExtractionFailed
(UNAVAILABLE, retry after s seconds, default 0.1) on the first n calls for that document; ``BIG <n>`` adds n nodes (a plan past
the claim-check limit).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import pairwise

from graph_ingest.domain.plan import GraphOptions
from graph_ingest.domain.request import IngestRequest
from graph_ingest.domain.state import DocumentState
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed, PlanningError
from graph_ingest.planning.request_planner import PlannedRequest
from graph_ingest.settings import Settings
from tests.samples import Entity, Relation, sample_plan

_WORD = re.compile(r"\b[A-Z][a-z]+\b")
_TRANSIENT = re.compile(r"TRANSIENT (\d+)(?: AFTER (\d+(?:\.\d+)?))?")
_BIG = re.compile(r"BIG (\d+)")


class CandidatePlanner:
    def __init__(self, graph: GraphOptions) -> None:
        self.graph = graph
        self.calls: Counter[str] = Counter()
        self.called_at: defaultdict[str, list[datetime]] = defaultdict(list)
        self.forgotten: set[tuple[str, str]] = set()
        self._planned: dict[tuple[str, str], DocumentState] = {}

    def start(self) -> None:
        """Nothing to open: it plans from the request alone."""

    def close(self) -> None:
        """Nothing to release."""

    def plan_request(self, request: IngestRequest) -> PlannedRequest:
        text = request.content or ""
        self.calls[request.key] += 1
        self.called_at[request.key].append(datetime.now(UTC))
        if "PERMANENT" in text:
            raise PlanningError(f"document {request.key} says PERMANENT")
        transient = _TRANSIENT.search(text)
        if transient and self.calls[request.key] <= int(transient[1]):
            raise ExtractionFailed(
                "injected: the model endpoint is down",
                code=StatusCode.UNAVAILABLE,
                retry_after_s=float(transient[2] or 0.1),
            )
        entities, relations = self._candidates(request, text)
        key = (request.space, request.document_id)
        plan = sample_plan(
            request.space,
            request.document_id,
            text,
            entities,
            relations,
            previous=self._planned.get(key),
            graph=self.graph,
        )
        self._planned[key] = plan.next_state
        return PlannedRequest(plan)

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        for key in keys:
            self.forgotten.add(key)
            self._planned.pop(key, None)

    @staticmethod
    def _candidates(request: IngestRequest, text: str) -> tuple[list[Entity], list[Relation]]:
        if request.candidates is not None:
            entities = {
                (e.entity_type, e.name): Entity(e.entity_type, e.name)
                for e in request.candidates.entities
            }
            relations = [
                Relation(
                    entities[(r.source.entity_type, r.source.name)],
                    r.relation_type,
                    entities[(r.target.entity_type, r.target.name)],
                )
                for r in request.candidates.relations
            ]
            return list(entities.values()), relations
        words = list(dict.fromkeys(_WORD.findall(text)))
        big = _BIG.search(text)
        words += [f"Filler{i:06d}" for i in range(int(big[1]) if big else 0)]
        things = [Entity("Thing", word) for word in words]
        return things, [Relation(a, "NEXT_TO", b) for a, b in pairwise(things)]


def build(settings: Settings) -> CandidatePlanner:
    """The factory ``worker planner --planner tests.planners:build`` loads: plans into the test
    pipeline's own graph label."""
    return CandidatePlanner(GraphOptions(node_label=f"T_{settings.postgres.schema_name}"))
