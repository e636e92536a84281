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
from decode_cost import kafka_messages, report, step_costs
from msgspec import Meta, Struct

from graph_ingest.domain.identifiers import IDENTIFIER_PATTERN, MAX_IDENTIFIER_LENGTH
from graph_ingest.domain.limits import MAX_ID_LENGTH, MAX_REVISION, MAX_SAFE_INTEGER
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.schemas.codec import read_single_object
from graph_ingest.schemas.registry import PLAN

NO_NUL = r"^[^\x00]*$"


def struct_types(patterns: bool) -> type[Struct]:
    """The plan as frozen Structs with the domain's constraints; ``patterns``: with the text
    patterns (NUL, identifiers), else lengths and ranges only."""

    def text(**constraints: Any) -> Any:
        return Annotated[str, Meta(**constraints, **({"pattern": NO_NUL} if patterns else {}))]

    identifier = Annotated[
        str,
        Meta(
            max_length=MAX_IDENTIFIER_LENGTH,
            **({"pattern": rf"^{IDENTIFIER_PATTERN.pattern}$"} if patterns else {}),
        ),
    ]
    stored_id = text(min_length=1, max_length=MAX_ID_LENGTH)
    stored_text = text()
    safe_integer = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
    offset = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
    scalar = str | int | float | bool
    property_value = scalar | list[scalar] | None

    class Frozen(Struct, frozen=True, forbid_unknown_fields=True):
        pass

    class NodeUpsert(Frozen, frozen=True):
        node_id: stored_id
        labels: tuple[identifier, ...] = ()
        properties: dict[identifier, property_value] = msgspec.field(default_factory=dict)

    class EdgeKey(Frozen, frozen=True):
        src: stored_id
        type: identifier
        dst: stored_id
        rank: safe_integer = 0

    class EdgeUpsert(Frozen, frozen=True):
        src: stored_id
        type: identifier
        dst: stored_id
        rank: safe_integer = 0
        properties: dict[identifier, property_value] = msgspec.field(default_factory=dict)

    class Mutation(Frozen, frozen=True):
        node_upserts: tuple[NodeUpsert, ...] = ()
        edge_upserts: tuple[EdgeUpsert, ...] = ()
        node_deletes: tuple[stored_id, ...] = ()
        edge_deletes: tuple[EdgeKey, ...] = ()
        detach_deleted_nodes: bool = False
        deletes_if_unreferenced: bool = False

    class Evidence(Frozen, frozen=True):
        quote: stored_text
        start: offset
        end: offset

    class FactSource(Frozen, frozen=True):
        fact_id: text(min_length=1)  # type: ignore[valid-type]
        kind: Literal["NODE", "EDGE"]
        evidence: tuple[Evidence, ...] = ()

    class DocumentState(Frozen, frozen=True):
        space: identifier
        document_id: stored_id
        revision: Annotated[int, Meta(ge=0, le=MAX_REVISION)]
        operation_id: stored_id
        content_hash: stored_id
        document_version: stored_text
        node_ids: tuple[stored_id, ...] = ()
        edge_keys: tuple[EdgeKey, ...] = ()
        superseded_edge_keys: tuple[EdgeKey, ...] = ()
        kept_edge_keys: tuple[EdgeKey, ...] = ()
        base_operation_id: stored_id | None = None
        fact_sources: tuple[FactSource, ...] = ()
        schema_version: stored_text | None = None
        extraction_fingerprint: stored_text | None = None
        source_updated_at: datetime | None = None
        committed_at: datetime | None = None

    class EntityRegistration(Frozen, frozen=True):
        space: identifier
        entity_type: identifier
        name: text(min_length=1)  # type: ignore[valid-type]
        normalized_name: stored_id
        node_id: stored_id
        aliases: tuple[stored_text, ...] = ()

    class GraphOptions(Frozen, frozen=True):
        database: identifier = "neo4j"
        node_label: identifier = "Entity"

    class Provenance(Frozen, frozen=True):
        extractor: str = "unknown"
        model: str | None = None
        prompt_version: str | None = None

    class Plan(Frozen, frozen=True):
        kind: Literal["INGESTION", "RETRACTION", "NO_OP"]
        space: identifier
        document_id: stored_id
        document_version: stored_text
        operation_id: stored_id
        expected_revision: Annotated[int, Meta(ge=0, le=MAX_REVISION - 1)]
        next_state: DocumentState
        created_at: datetime
        fingerprint: stored_text
        base_operation_id: stored_id | None = None
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
    steps = {
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
