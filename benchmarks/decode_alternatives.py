"""What the decode path's validation would cost with msgspec instead of pydantic (issue 20).

    python benchmarks/decode_alternatives.py [--small N] [--large N] [--repeat R]

Needs msgspec (``pip install -e '.[bench]'``). The applier validates every decoded plan record
into the pydantic domain (``IngestionPlan.model_validate``). This measures, on the same records
(``decode_cost.py`` builds them; CPU time, best of ``--repeat``), what the lever the issue names
("msgspec straight into slotted types") would pay:

* ``fastavro read``: the record itself, which any validation starts from;
* ``pydantic``: the domain's validation, as the applier runs it;
* ``msgspec``: ``msgspec.convert`` into frozen Structs with the domain's field constraints
  (``PLAN_STRUCT`` below), the text patterns included: msgspec runs them with Python's ``re``;
* ``msgspec, no patterns``: the same Structs without the NUL and identifier patterns;
* ``NUL scan``: the cheapest Python pass that could stand in for the NUL patterns: every string
  of the record collected and joined, then searched once (the identifier checks would cost more).

The Structs are built in a function, from its local constraint types, so their annotations stay
evaluated (no ``from __future__ import annotations``: msgspec could not resolve the names). They
stand in for a domain that does not exist: they carry the field constraints, not the
validators that check a plan's consistency (those are plain Python and would stay as they are).
"""

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from decode_cost import Steps, kafka_messages, report, step_costs
from msgspec import Meta, Struct

from graph_ingest.domain.identifiers import IDENTIFIER_PATTERN, MAX_IDENTIFIER_LENGTH
from graph_ingest.domain.limits import MAX_ID_LENGTH, MAX_REVISION, MAX_SAFE_INTEGER
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.schemas.codec import read_single_object
from graph_ingest.schemas.registry import PLAN

NO_NUL = r"^[^\x00]*$"


Scalar = str | int | float | bool
PropertyValue = Scalar | list[Scalar] | None
SafeInteger = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Offset = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]


def struct_types(patterns: bool) -> type[Any]:
    """The plan as frozen Structs with the domain's constraints; ``patterns``: with the text
    patterns (NUL, identifiers), else lengths and ranges only. The constraints differ by call,
    so each field names its ``Meta`` as ``Annotated[str, <meta>]``."""

    def text(**constraints: Any) -> Meta:
        return Meta(**constraints, **({"pattern": NO_NUL} if patterns else {}))

    identifier = Meta(
        max_length=MAX_IDENTIFIER_LENGTH,
        **({"pattern": rf"^{IDENTIFIER_PATTERN.pattern}$"} if patterns else {}),
    )
    stored_id = text(min_length=1, max_length=MAX_ID_LENGTH)
    stored_text = text()
    non_empty = text(min_length=1)

    # mypy sees msgspec as Any (pyproject: the bench extra's libraries), so that lint agrees
    # with or without it; the subclasses inherit this configuration.
    class Frozen(Struct, frozen=True, forbid_unknown_fields=True):  # type: ignore[misc,call-arg]
        pass

    class NodeUpsert(Frozen):
        node_id: Annotated[str, stored_id]
        labels: tuple[Annotated[str, identifier], ...] = ()
        properties: dict[Annotated[str, identifier], PropertyValue] = msgspec.field(
            default_factory=dict
        )

    class EdgeKey(Frozen):
        src: Annotated[str, stored_id]
        type: Annotated[str, identifier]
        dst: Annotated[str, stored_id]
        rank: SafeInteger = 0

    class EdgeUpsert(Frozen):
        src: Annotated[str, stored_id]
        type: Annotated[str, identifier]
        dst: Annotated[str, stored_id]
        rank: SafeInteger = 0
        properties: dict[Annotated[str, identifier], PropertyValue] = msgspec.field(
            default_factory=dict
        )

    class Mutation(Frozen):
        node_upserts: tuple[NodeUpsert, ...] = ()
        edge_upserts: tuple[EdgeUpsert, ...] = ()
        node_deletes: tuple[Annotated[str, stored_id], ...] = ()
        edge_deletes: tuple[EdgeKey, ...] = ()
        detach_deleted_nodes: bool = False
        deletes_if_unreferenced: bool = False

    class Evidence(Frozen):
        quote: Annotated[str, stored_text]
        start: Offset
        end: Offset

    class FactSource(Frozen):
        fact_id: Annotated[str, non_empty]
        kind: Literal["NODE", "EDGE"]
        evidence: tuple[Evidence, ...] = ()

    class DocumentState(Frozen):
        space: Annotated[str, identifier]
        document_id: Annotated[str, stored_id]
        revision: Annotated[int, Meta(ge=0, le=MAX_REVISION)]
        operation_id: Annotated[str, stored_id]
        content_hash: Annotated[str, stored_id]
        document_version: Annotated[str, stored_text]
        node_ids: tuple[Annotated[str, stored_id], ...] = ()
        edge_keys: tuple[EdgeKey, ...] = ()
        superseded_edge_keys: tuple[EdgeKey, ...] = ()
        kept_edge_keys: tuple[EdgeKey, ...] = ()
        base_operation_id: Annotated[str, stored_id] | None = None
        fact_sources: tuple[FactSource, ...] = ()
        schema_version: Annotated[str, stored_text] | None = None
        extraction_fingerprint: Annotated[str, stored_text] | None = None
        source_updated_at: datetime | None = None
        committed_at: datetime | None = None

    class EntityRegistration(Frozen):
        space: Annotated[str, identifier]
        entity_type: Annotated[str, identifier]
        name: Annotated[str, non_empty]
        normalized_name: Annotated[str, stored_id]
        node_id: Annotated[str, stored_id]
        aliases: tuple[Annotated[str, stored_text], ...] = ()

    class GraphOptions(Frozen):
        database: Annotated[str, identifier] = "neo4j"
        node_label: Annotated[str, identifier] = "Entity"

    class Provenance(Frozen):
        extractor: str = "unknown"
        model: str | None = None
        prompt_version: str | None = None

    class Plan(Frozen):
        kind: Literal["INGESTION", "RETRACTION", "NO_OP"]
        space: Annotated[str, identifier]
        document_id: Annotated[str, stored_id]
        document_version: Annotated[str, stored_text]
        operation_id: Annotated[str, stored_id]
        expected_revision: Annotated[int, Meta(ge=0, le=MAX_REVISION - 1)]
        next_state: DocumentState
        created_at: datetime
        fingerprint: Annotated[str, stored_text]
        base_operation_id: Annotated[str, stored_id] | None = None
        graph: GraphOptions = GraphOptions()
        mutation: Mutation = Mutation()
        registrations: tuple[EntityRegistration, ...] = ()
        provenance: Provenance = Provenance()

    return Plan


def _collect_strings(value: object, into: list[str]) -> None:
    kind = type(value)
    if kind is str:
        into.append(value)  # type: ignore[arg-type]
    elif kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            into.append(key)
            _collect_strings(item, into)
    elif kind is list:
        for item in value:  # type: ignore[attr-defined]
            _collect_strings(item, into)


def nul_free(record: dict[str, Any]) -> bool:
    strings: list[str] = []
    _collect_strings(record, strings)
    return "\x00" not in "".join(strings)


def measure(kind: str, count: int, repeat: int) -> dict[str, float]:
    values, _, elements = kafka_messages(kind, count)
    records = [read_single_object(v, PLAN) for v in values]
    strict, lenient = struct_types(patterns=True), struct_types(patterns=False)
    for plan_type in (strict, lenient):  # the Structs take what the domain takes
        converted = msgspec.convert(records[0], plan_type)
        if len(converted.mutation.node_upserts) != len(records[0]["mutation"]["node_upserts"]):
            raise RuntimeError("the Structs lost upserts")
    steps: Steps = {
        "fastavro read": (lambda v: read_single_object(v, PLAN), values),
        "pydantic": (IngestionPlan.model_validate, records),
        "msgspec": (lambda r: msgspec.convert(r, strict), records),
        "msgspec, no patterns": (lambda r: msgspec.convert(r, lenient), records),
        "NUL scan": (nul_free, records),
    }
    return step_costs(steps, repeat, elements)


def main() -> None:
    report(__doc__, measure, small=1000)


if __name__ == "__main__":
    main()
