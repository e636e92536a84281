"""The planner: one ingest request in, one frozen plan out.

extract (or not: NO_OP) -> validate -> resolve -> diff against the previous state -> freeze.

The previous state is the latest this planner *planned* for the document (``PlannedStates``)
when that is ahead of the committed one, else the committed state. Plans are pure functions of
the request, that previous state and what the store says (registry, other documents' states):
planning the same request on the same state again gives a plan with the same fingerprint and
operation id. ``plan`` remembers each plan's next state; a caller that does not publish a plan
after all must ``forget`` its document.

* **NO_OP**: the same content hash, document version, schema version and extraction fingerprint
  as the previous state (and ``re_extract_unchanged`` off): the extractor is not called; the plan
  commits the same state one revision on.
* **INGESTION**: node upserts (label = entity type, properties + ``name``), edge upserts, stale
  edges (previous - new) always superseded and, under DELETE_IF_UNREFERENCED, deleted unless
  another document's committed or planned state lists them; fact sources with evidence for every
  node and edge; registrations for every entity.
* **RETRACTION**: deletes the document's edges and (detaching) nodes that no other document's
  state lists; the next state lists nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from pydantic import ValidationError

from graph_ingest.domain.candidates import Extraction, ExtractionIssue
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.mutation import EdgeKey, Mutation, NodeUpsert
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind
from graph_ingest.domain.request import IngestRequest, RequestKind, StaleRelationPolicy
from graph_ingest.domain.state import DocumentState, EntityRegistration
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.assembly import (
    StaleElements,
    edges_of,
    ingestion_mutation,
    ingestion_state,
    node_upserts,
)
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.content import ContentReader, read_file_uri, request_content
from graph_ingest.planning.diff import check_order, is_unchanged, stale_edges, stale_nodes
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.extractor import Extractor
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.identity import PlanIdentity, ingestion_identity, retraction_identity
from graph_ingest.planning.planned_states import DocumentKey, PlannedStates
from graph_ingest.planning.precomputed import PrecomputedExtractor
from graph_ingest.planning.request_planner import PlannedRequest
from graph_ingest.planning.resolution import RegistryView, resolve_entities
from graph_ingest.planning.validation import validate_extraction
from graph_ingest.settings.planner import PlannerSettings

log = logging.getLogger(__name__)


class PlanningView(RegistryView, Protocol):
    """What the planner reads of the bookkeeping store (PostgresOperationStore is one)."""

    def get_document_state(self, space: str, document_id: str) -> DocumentState | None: ...

    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]: ...

    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]: ...


class Resource(Protocol):
    """Something a planner owns and opens and releases with itself (the store behind its view,
    the model endpoint's client)."""

    def start(self) -> None: ...

    def close(self) -> None: ...


IssueSink = Callable[[IngestRequest, Sequence[ExtractionIssue]], None]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Planner:
    def __init__(
        self,
        schema: GraphSchema,
        extractors: Mapping[str, Extractor],
        view: PlanningView,
        settings: PlannerSettings,
        *,
        planned: PlannedStates | None = None,
        graph: GraphOptions | None = None,
        read_content: ContentReader = read_file_uri,
        on_issues: IssueSink | None = None,
        clock: Callable[[], datetime] = _utc_now,
        resources: Sequence[Resource] = (),
    ) -> None:
        """``resources``: what ``start`` opens and ``close`` releases (in reverse order); a view
        or an extractor not listed belongs to the caller."""
        if settings.extractor not in extractors:
            raise ConfigurationError(
                f"planner.extractor {settings.extractor!r} is not one of {sorted(extractors)}"
            )
        self._schema = schema
        self._extractors = dict(extractors)
        self._view = view
        self._settings = settings
        self._planned = planned if planned is not None else PlannedStates()
        self._graph = graph or GraphOptions()
        self._read_content = read_content
        self._on_issues = on_issues
        self._clock = clock
        self._resources = tuple(resources)

    def start(self) -> None:
        for resource in self._resources:
            resource.start()

    def close(self) -> None:
        for resource in reversed(self._resources):
            resource.close()

    @property
    def planned(self) -> PlannedStates:
        return self._planned

    def forget(self, keys: Iterable[DocumentKey]) -> None:
        """Drop what was planned for these documents: their plans were not published, or their
        partitions went to another planner. Their next plan starts from the committed state."""
        self._planned.forget(keys)

    def plan(self, request: IngestRequest) -> IngestionPlan:
        """The plan of one request (``plan_request``, without its issues)."""
        return self.plan_request(request).plan

    def plan_request(self, request: IngestRequest) -> PlannedRequest:
        """Plan one request: its plan and the extraction issues recorded on the way (candidates
        dropped, model output unusable); PlanningError (with its status code) when it cannot be
        planned."""
        previous = self._previous((request.space, request.document_id))
        check_order(previous, request.document_version, request.source_updated_at)
        try:
            if request.kind is RequestKind.RETRACT:
                planned = PlannedRequest(self._retraction(request, previous))
            else:
                planned = self._ingestion(request, previous)
        except ValidationError as error:
            # What the document says does not fit what a plan may hold (a key past an index).
            first = error.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or error.title
            raise PlanningError(
                f"document {request.key}: the plan fails validation "
                f"({error.error_count()} error(s); first: {where}: {first['msg']})"
            ) from None
        plan = planned.plan
        self._planned.remember(plan.next_state)
        log.info(
            "planned %s %s op=%s expected_revision=%d elements=%d",
            plan.kind.value,
            plan.key,
            plan.operation_id,
            plan.expected_revision,
            plan.mutation.element_count,
        )
        return planned

    def _previous(self, key: DocumentKey) -> DocumentState | None:
        committed = self._view.get_document_state(*key)
        planned = self._planned.get(key)
        if planned is not None and (committed is None or planned.revision > committed.revision):
            return planned
        if planned is not None:
            self._planned.forget([key])  # the committed state has caught up
        return committed

    # -- ingestion -------------------------------------------------------------------------

    def _ingestion(self, request: IngestRequest, previous: DocumentState | None) -> PlannedRequest:
        self._check_schema_version(request)
        extractor = self._extractor_for(request)
        identity = ingestion_identity(
            request, previous, extractor, self._schema.version, self._settings
        )
        source_updated_at = _source_updated_at(request, previous)
        if (
            previous is not None
            and not request.options.re_extract_unchanged
            and is_unchanged(
                previous,
                content_hash=identity.content_hash,
                document_version=request.document_version,
                schema_version=self._schema.version,
                extraction_fingerprint=identity.extraction_fingerprint,
            )
        ):
            # Nothing to change: the NO_OP's next state is its base, committed as it is.
            base_state = previous.model_copy(update={"committed_at": None})
            no_op = self._freeze(PlanKind.NO_OP, request, identity, Mutation(), base_state, ())
            return PlannedRequest(no_op)
        extraction = self._extract(request, extractor, identity.content_hash)
        resolution = resolve_entities(request.space, extraction.entities, self._view)
        nodes = node_upserts(resolution)
        edges = edges_of(extraction.relations, resolution)
        stale = self._stale(request, previous, nodes, edges)
        state = ingestion_state(
            request,
            identity,
            resolution,
            edges,
            stale,
            schema_version=self._schema.version,
            source_updated_at=source_updated_at,
        )
        mutation = ingestion_mutation(nodes, edges, stale)
        registrations = resolution.registrations(request.space)
        plan = self._freeze(PlanKind.INGESTION, request, identity, mutation, state, registrations)
        return PlannedRequest(plan, extraction.issues)

    def _check_schema_version(self, request: IngestRequest) -> None:
        if request.schema_version != self._schema.version:
            raise PlanningError(
                f"document {request.key}: the request names graph schema version "
                f"{request.schema_version!r}; this planner plans with {self._schema.version!r}",
                code=StatusCode.FAILED_PRECONDITION,
            )

    def _extractor_for(self, request: IngestRequest) -> Extractor:
        """The request's own candidates when it brings them, else the configured extractor."""
        if request.candidates is not None:
            return PrecomputedExtractor(request.candidates)
        return self._extractors[self._settings.extractor]

    def _extract(self, request: IngestRequest, extractor: Extractor, digest: str) -> Extraction:
        """Chunk the text, extract candidates, validate them against the schema; the issues
        found on the way are logged and handed to ``on_issues``."""
        chunks = chunk_document(
            request.document_id,
            request_content(request, digest, self._read_content),
            max_chars=self._settings.chunk_max_chars,
        )
        extraction = validate_extraction(
            extractor.extract(chunks, self._schema),
            chunks,
            self._schema,
            min_confidence=self._settings.min_confidence,
            fail_on_error=request.options.fail_on_extraction_error,
        )
        if extraction.issues:
            log.warning(
                "document %s: %d extraction issue(s): %s",
                request.key,
                len(extraction.issues),
                sorted({issue.code for issue in extraction.issues}),
            )
            if self._on_issues is not None:
                self._on_issues(request, extraction.issues)
        return extraction

    # -- retraction ------------------------------------------------------------------------

    def _retraction(self, request: IngestRequest, previous: DocumentState | None) -> IngestionPlan:
        if previous is None:
            raise PlanningError(
                f"document {request.key}: nothing to retract (it was never ingested)",
                code=StatusCode.NOT_FOUND,
            )
        key = (request.space, request.document_id)
        identity = retraction_identity(request, previous)
        edges = stale_edges(previous, ())
        state = DocumentState(
            space=request.space,
            document_id=request.document_id,
            revision=identity.expected_revision + 1,
            operation_id=identity.operation_id,
            base_operation_id=identity.base_operation_id,
            content_hash=previous.content_hash,
            document_version=request.document_version,
            superseded_edge_keys=edges,
            source_updated_at=_source_updated_at(request, previous),
        )
        mutation = Mutation(
            edge_deletes=self._unclaimed_edges(key, edges),
            node_deletes=self._unclaimed_nodes(key, sorted(previous.node_ids)),
            detach_deleted_nodes=True,
            deletes_if_unreferenced=True,
        )
        return self._freeze(PlanKind.RETRACTION, request, identity, mutation, state, ())

    # -- shared ----------------------------------------------------------------------------

    def _unclaimed_edges(self, key: DocumentKey, edges: Sequence[EdgeKey]) -> tuple[EdgeKey, ...]:
        """``edges`` that no other document's committed or planned state lists."""
        if not edges:
            return ()
        claimed = {e for _, e in self._view.claimed_edges([(key, e) for e in edges])}
        claimed |= self._planned.edges_listed_by_others(key, edges)
        return tuple(e for e in edges if e not in claimed)

    def _unclaimed_nodes(self, key: DocumentKey, nodes: Sequence[str]) -> tuple[str, ...]:
        if not nodes:
            return ()
        claimed = {n for _, n in self._view.claimed_nodes([(key, n) for n in nodes])}
        claimed |= self._planned.nodes_listed_by_others(key, nodes)
        return tuple(n for n in nodes if n not in claimed)

    def _stale(
        self,
        request: IngestRequest,
        previous: DocumentState | None,
        nodes: Sequence[NodeUpsert],
        edges: Mapping[EdgeKey, object],
    ) -> StaleElements:
        """What the new version drops from the previous one, and what becomes of it.

        DELETE_IF_UNREFERENCED deletes dropped edges that no other document lists; KEEP keeps
        them as the document's (``kept_edge_keys``), with their endpoints among its nodes. A
        dropped node that is no kept edge's endpoint is deleted (with what still touches it)
        when no other document lists it, under either policy: KEEP keeps relations."""
        key = (request.space, request.document_id)
        stale = stale_edges(previous, edges)
        mentioned = {n.node_id for n in nodes}
        superseded: tuple[EdgeKey, ...] = ()
        kept: tuple[EdgeKey, ...] = ()
        edge_deletes: tuple[EdgeKey, ...] = ()
        if request.options.stale_relation_policy is StaleRelationPolicy.DELETE_IF_UNREFERENCED:
            superseded, edge_deletes = stale, self._unclaimed_edges(key, stale)
        else:
            kept = stale
        node_ids = mentioned | {end for k in kept for end in (k.src, k.dst)}
        return StaleElements(
            node_ids=tuple(sorted(node_ids)),
            superseded=superseded,
            kept=kept,
            edge_deletes=edge_deletes,
            node_deletes=self._unclaimed_nodes(key, stale_nodes(previous, node_ids)),
        )

    def _freeze(
        self,
        kind: PlanKind,
        request: IngestRequest,
        identity: PlanIdentity,
        mutation: Mutation,
        state: DocumentState,
        registrations: Iterable[EntityRegistration],
    ) -> IngestionPlan:
        return IngestionPlan.freeze(
            kind=kind,
            space=request.space,
            document_id=request.document_id,
            document_version=request.document_version,
            operation_id=identity.operation_id,
            expected_revision=identity.expected_revision,
            base_operation_id=identity.base_operation_id,
            graph=self._graph,
            mutation=mutation,
            next_state=state,
            registrations=tuple(registrations),
            provenance=identity.provenance,
            created_at=self._clock(),
        )


def _source_updated_at(request: IngestRequest, previous: DocumentState | None) -> datetime | None:
    if request.source_updated_at is not None:
        return request.source_updated_at
    return previous.source_updated_at if previous is not None else None


__all__ = ["Planner", "PlanningView", "Resource"]
