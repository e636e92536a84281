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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlparse
from urllib.request import url2pathname

from pydantic import ValidationError

from graph_ingest.domain.candidates import CandidateEvidence, ExtractionIssue, RelationCandidate
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.ids import content_hash, derive_operation_id
from graph_ingest.domain.mutation import EdgeKey, EdgeUpsert, Mutation, NodeUpsert, PropertyValue
from graph_ingest.domain.plan import GraphOptions, IngestionPlan, PlanKind, Provenance
from graph_ingest.domain.request import IngestRequest, RequestKind, StaleRelationPolicy
from graph_ingest.domain.state import (
    DocumentState,
    EntityRegistration,
    Evidence,
    FactKind,
    FactSource,
    fact_id_of,
)
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.diff import (
    check_order,
    extraction_fingerprint,
    is_unchanged,
    stale_edges,
    stale_nodes,
)
from graph_ingest.planning.errors import PlanningError
from graph_ingest.planning.extractor import Extractor
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.planned_states import DocumentKey, PlannedStates
from graph_ingest.planning.precomputed import PrecomputedExtractor
from graph_ingest.planning.request_planner import PlannedRequest
from graph_ingest.planning.resolution import RegistryView, Resolution, resolve_entities
from graph_ingest.planning.validation import validate_extraction
from graph_ingest.settings import PlannerSettings

log = logging.getLogger(__name__)

# The extraction fingerprint of a retraction: it extracts nothing.
RETRACTION_FINGERPRINT = "retraction"


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


ContentReader = Callable[[str], str]
IssueSink = Callable[[IngestRequest, Sequence[ExtractionIssue]], None]


def read_file_uri(ref: str) -> str:
    """The default content reader: ``file://`` URIs, UTF-8."""
    parsed = urlparse(ref)
    if parsed.scheme != "file":
        raise PlanningError(
            f"content_ref {ref!r}: only file:// references can be read",
            code=StatusCode.FAILED_PRECONDITION,
        )
    path = Path(url2pathname(parsed.path))
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise PlanningError(
            f"content_ref {ref!r}: cannot read: {error.strerror}", code=StatusCode.UNAVAILABLE
        ) from None
    except UnicodeDecodeError:
        raise PlanningError(f"content_ref {ref!r}: not UTF-8 text") from None


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
        schema = self._schema
        if request.schema_version != schema.version:
            raise PlanningError(
                f"document {request.key}: the request names graph schema version "
                f"{request.schema_version!r}; this planner plans with {schema.version!r}",
                code=StatusCode.FAILED_PRECONDITION,
            )
        extractor = (
            PrecomputedExtractor(request.candidates)
            if request.candidates is not None
            else self._extractors[self._settings.extractor]
        )
        identity = extractor.identity()
        digest = _content_hash(request)
        fingerprint = extraction_fingerprint(
            extractor=extractor.name,
            identity=identity,
            schema_version=schema.version,
            content_hash=digest,
            planner={
                "chunk_max_chars": self._settings.chunk_max_chars,
                "min_confidence": self._settings.min_confidence,
            },
        )
        expected = previous.revision if previous is not None else 0
        base = previous.operation_id if previous is not None else None
        operation_id = request.operation_id or derive_operation_id(
            request.space, request.document_id, expected, digest, fingerprint, base
        )
        provenance = Provenance(
            extractor=extractor.name,
            model=_optional_text(identity.get("model")),
            prompt_version=_optional_text(identity.get("prompt_version")),
        )
        source_updated_at = _source_updated_at(request, previous)
        if (
            previous is not None
            and not request.options.re_extract_unchanged
            and is_unchanged(
                previous,
                content_hash=digest,
                document_version=request.document_version,
                schema_version=schema.version,
                extraction_fingerprint=fingerprint,
            )
        ):
            # Nothing to change: the NO_OP's next state is its base, committed as it is.
            no_op = self._freeze(
                PlanKind.NO_OP,
                request,
                expected,
                Mutation(),
                previous.model_copy(update={"committed_at": None}),
                (),
                provenance,
                operation_id=operation_id,
                base=base,
            )
            return PlannedRequest(no_op)

        chunks = chunk_document(
            request.document_id,
            self._content(request, digest),
            max_chars=self._settings.chunk_max_chars,
        )
        extraction = validate_extraction(
            extractor.extract(chunks, schema),
            chunks,
            schema,
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
        resolution = resolve_entities(request.space, extraction.entities, self._view)
        nodes = [
            NodeUpsert(
                node_id=entity.node_id,
                labels=(entity.entity_type,),
                properties={**entity.properties, "name": entity.name},
            )
            for entity in resolution.entities
        ]
        edges = _edges(extraction.relations, resolution)
        stale = self._stale(request, previous, nodes, edges)
        state = DocumentState(
            space=request.space,
            document_id=request.document_id,
            revision=expected + 1,
            operation_id=operation_id,
            base_operation_id=base,
            content_hash=digest,
            document_version=request.document_version,
            node_ids=stale.node_ids,
            edge_keys=tuple(sorted(edges, key=EdgeKey.sort_key)),
            superseded_edge_keys=stale.superseded,
            kept_edge_keys=stale.kept,
            fact_sources=tuple(
                [_fact(e.node_id, FactKind.NODE, e.evidence) for e in resolution.entities]
                + [_fact(fact_id_of(k), FactKind.EDGE, ev) for k, (_, ev) in edges.items()]
            ),
            schema_version=schema.version,
            extraction_fingerprint=fingerprint,
            source_updated_at=source_updated_at,
        )
        mutation = Mutation(
            node_upserts=tuple(nodes),
            edge_upserts=tuple(
                EdgeUpsert(src=k.src, type=k.type, dst=k.dst, rank=k.rank, properties=props)
                for k, (props, _) in edges.items()
            ),
            edge_deletes=stale.edge_deletes,
            node_deletes=stale.node_deletes,
            detach_deleted_nodes=bool(stale.node_deletes),
            # only when there are deletes: a new document's plan keeps its fingerprint
            deletes_if_unreferenced=bool(stale.edge_deletes or stale.node_deletes),
        )
        registrations = resolution.registrations(request.space)
        plan = self._freeze(
            PlanKind.INGESTION,
            request,
            expected,
            mutation,
            state,
            registrations,
            provenance,
            operation_id=operation_id,
            base=base,
        )
        return PlannedRequest(plan, extraction.issues)

    def _content(self, request: IngestRequest, digest: str) -> str:
        if request.content is not None:
            return request.content
        text = self._read_content(str(request.content_ref))
        if content_hash(text) != digest:
            raise PlanningError(
                f"document {request.key}: the content at content_ref does not match content_hash"
            )
        return text

    # -- retraction ------------------------------------------------------------------------

    def _retraction(self, request: IngestRequest, previous: DocumentState | None) -> IngestionPlan:
        if previous is None:
            raise PlanningError(
                f"document {request.key}: nothing to retract (it was never ingested)",
                code=StatusCode.NOT_FOUND,
            )
        key = (request.space, request.document_id)
        expected = previous.revision
        base = previous.operation_id
        operation_id = request.operation_id or derive_operation_id(
            request.space,
            request.document_id,
            expected,
            previous.content_hash,
            RETRACTION_FINGERPRINT,
            base,
        )
        edges = stale_edges(previous, ())
        state = DocumentState(
            space=request.space,
            document_id=request.document_id,
            revision=expected + 1,
            operation_id=operation_id,
            base_operation_id=base,
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
        provenance = Provenance(extractor="retraction")
        return self._freeze(
            PlanKind.RETRACTION,
            request,
            expected,
            mutation,
            state,
            (),
            provenance,
            operation_id=operation_id,
            base=base,
        )

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
    ) -> _Stale:
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
        return _Stale(
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
        expected: int,
        mutation: Mutation,
        state: DocumentState,
        registrations: Iterable[EntityRegistration],
        provenance: Provenance,
        *,
        operation_id: str,
        base: str | None,
    ) -> IngestionPlan:
        return IngestionPlan.freeze(
            kind=kind,
            space=request.space,
            document_id=request.document_id,
            document_version=request.document_version,
            operation_id=operation_id,
            expected_revision=expected,
            base_operation_id=base,
            graph=self._graph,
            mutation=mutation,
            next_state=state,
            registrations=tuple(registrations),
            provenance=provenance,
            created_at=self._clock(),
        )


@dataclass(frozen=True, slots=True)
class _Stale:
    """The previous version's elements as the new state and mutation treat them."""

    node_ids: tuple[str, ...]
    superseded: tuple[EdgeKey, ...]
    kept: tuple[EdgeKey, ...]
    edge_deletes: tuple[EdgeKey, ...]
    node_deletes: tuple[str, ...]


def _content_hash(request: IngestRequest) -> str:
    if request.content is None:
        return cast(str, request.content_hash)  # a content_ref comes with its hash (the model)
    actual = content_hash(request.content)
    if request.content_hash is not None and request.content_hash != actual:
        raise PlanningError(
            f"document {request.key}: content_hash {request.content_hash!r} is not the hash of "
            f"the content ({actual})"
        )
    return actual


def _source_updated_at(request: IngestRequest, previous: DocumentState | None) -> datetime | None:
    if request.source_updated_at is not None:
        return request.source_updated_at
    return previous.source_updated_at if previous is not None else None


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


EdgePlan = tuple[dict[str, PropertyValue], tuple[CandidateEvidence, ...]]


def _edges(
    relations: Sequence[RelationCandidate], resolution: Resolution
) -> dict[EdgeKey, EdgePlan]:
    """One edge per (source node, type, target node): properties first-seen, evidence merged."""
    edges: dict[EdgeKey, EdgePlan] = {}
    for relation in relations:
        key = EdgeKey(
            src=resolution.node_of(relation.source.entity_type, relation.source.name),
            type=relation.relation_type,
            dst=resolution.node_of(relation.target.entity_type, relation.target.name),
        )
        properties, evidence = edges.get(key, ({}, ()))
        edges[key] = (
            {**relation.properties, **properties},
            (*evidence, *relation.evidence),
        )
    return edges


def _fact(fact_id: str, kind: FactKind, evidence: Iterable[CandidateEvidence]) -> FactSource:
    unique = {(e.start, e.end): Evidence(quote=e.quote, start=e.start, end=e.end) for e in evidence}
    return FactSource(fact_id=fact_id, kind=kind, evidence=tuple(unique[k] for k in sorted(unique)))


__all__ = ["RETRACTION_FINGERPRINT", "Planner", "PlanningView", "Resource", "read_file_uri"]
