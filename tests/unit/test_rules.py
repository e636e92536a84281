"""The rules extractor: gazetteer and relation patterns from the graph schema, evidence exact."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from graph_ingest.domain.candidates import Chunk, EntityCandidate, Extraction, RelationCandidate
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.chunking import chunk_document
from graph_ingest.planning.errors import ExtractionFailed, GraphSchemaError
from graph_ingest.planning.graph_schema import GraphSchema, load_graph_schema, parse_graph_schema
from graph_ingest.planning.rules import MAX_EVIDENCE, RulesExtractor
from graph_ingest.wiring import BUNDLED_GRAPH_SCHEMA

pytestmark = pytest.mark.timeout(30)

EXAMPLE = BUNDLED_GRAPH_SCHEMA

SCHEMA: dict[str, Any] = {
    "version": "1",
    "node_types": {
        "Person": {"properties": {"role": {"type": "string"}}},
        "Team": {},
        "System": {"properties": {"tier": {"type": "string", "enum": ["critical", "standard"]}}},
    },
    "relation_types": {
        "MEMBER_OF": {"sources": ["Person"], "targets": ["Team"]},
        "OWNS": {"sources": ["Person", "Team"], "targets": ["System"]},
        "DEPENDS_ON": {"sources": ["System"], "targets": ["System"]},
    },
    "extraction": {
        "rules": {
            "entities": {
                "Person": [
                    {"name": "Bob Stone", "aliases": ["Bob"], "properties": {"role": "engineer"}},
                    "Carol",
                ],
                "Team": ["Payments"],
                "System": [
                    {"name": "Ledger", "properties": {"tier": "critical"}},
                    "Ledger Service",
                    "支付系统",
                ],
            },
            "relations": [
                {"type": "MEMBER_OF", "pattern": "{source} is a member of [the] {target}"},
                {"type": "OWNS", "pattern": "{source} owns [the] {target}"},
                {"type": "OWNS", "pattern": "{source}负责{target}"},
                {
                    "type": "DEPENDS_ON",
                    "regex": r"(?P<source>[A-Z]\w+) needs (?P<target>[A-Z]\w+)",
                    "ignore_case": False,
                },
            ],
        }
    },
}


def schema(**changes: Any) -> GraphSchema:
    document = copy.deepcopy(SCHEMA)
    document["extraction"]["rules"].update(changes)
    return parse_graph_schema(document)


def extract(text: str, graph_schema: GraphSchema | None = None) -> tuple[Extraction, list[Chunk]]:
    used = graph_schema or schema()
    chunks = list(chunk_document("doc", text, max_chars=400))
    return RulesExtractor(used).extract(chunks, used), chunks


def entities(extraction: Extraction) -> list[tuple[str, str, list[str]]]:
    return [(e.entity_type, e.name, [v.quote for v in e.evidence]) for e in extraction.entities]


def relations(extraction: Extraction) -> set[tuple[str, str, str]]:
    return {(r.source.name, r.relation_type, r.target.name) for r in extraction.relations}


def assert_evidence_exact(text: str, extraction: Extraction, chunks: list[Chunk]) -> None:
    by_id = {c.chunk_id: c for c in chunks}
    candidates: tuple[EntityCandidate | RelationCandidate, ...] = (
        *extraction.entities,
        *extraction.relations,
    )
    for candidate in candidates:
        assert candidate.evidence
        for evidence in candidate.evidence:
            assert text[evidence.start : evidence.end] == evidence.quote
            chunk = by_id[evidence.chunk_id]
            assert chunk.start <= evidence.start < evidence.end <= chunk.end


def test_names_and_phrases_become_candidates_with_exact_evidence() -> None:
    text = "Bob is a member of the Payments team.\n\nPayments owns the Ledger Service. Carol too."

    extraction, chunks = extract(text)

    assert entities(extraction) == [
        ("Person", "Bob Stone", ["Bob"]),
        ("Team", "Payments", ["Payments", "Payments"]),
        ("System", "Ledger Service", ["Ledger Service"]),  # the longest name wins
        ("Person", "Carol", ["Carol"]),
    ]
    bob = extraction.entities[0]
    assert (bob.aliases, bob.properties) == (("Bob",), {"role": "engineer"})
    assert relations(extraction) == {
        ("Bob Stone", "MEMBER_OF", "Payments"),
        ("Payments", "OWNS", "Ledger Service"),
    }
    quotes = {r.relation_type: r.evidence[0].quote for r in extraction.relations}
    assert quotes["MEMBER_OF"] == "Bob is a member of the Payments"
    assert extraction.issues == ()
    assert_evidence_exact(text, extraction, chunks)


def test_names_match_whole_words_case_insensitively_and_chinese_names_anywhere() -> None:
    text = "Bobby met CAROL. 张三负责支付系统。"

    extraction, chunks = extract(text)

    assert [(e.name, [v.quote for v in e.evidence]) for e in extraction.entities] == [
        ("Carol", ["CAROL"]),
        ("支付系统", ["支付系统"]),
    ]
    assert_evidence_exact(text, extraction, chunks)


def test_a_phrase_in_chinese_matches_without_spaces() -> None:
    document = copy.deepcopy(SCHEMA)
    document["extraction"]["rules"]["entities"]["Person"].append("张三")
    text = "会议纪要\uff1a张三负责支付系统。"  # a full-width colon

    extraction, chunks = extract(text, parse_graph_schema(document))

    assert relations(extraction) == {("张三", "OWNS", "支付系统")}
    assert extraction.relations[0].evidence[0].quote == "张三负责支付系统"
    assert_evidence_exact(text, extraction, chunks)


def test_a_regex_endpoint_the_gazetteer_does_not_know_becomes_a_new_entity() -> None:
    text = "Ledger needs Vault. vault needs Ledger."  # case matters for this rule

    extraction, chunks = extract(text)

    assert relations(extraction) == {("Ledger", "DEPENDS_ON", "Vault")}
    vault = next(e for e in extraction.entities if e.name == "Vault")
    assert (vault.entity_type, vault.properties, [v.quote for v in vault.evidence]) == (
        "System",
        {},
        ["Vault"],
    )
    assert_evidence_exact(text, extraction, chunks)


def test_an_unknown_endpoint_of_a_side_with_several_types_is_an_issue() -> None:
    rules = {"type": "OWNS", "regex": r"(?P<source>\w+) runs (?P<target>Ledger)"}
    graph_schema = schema(relations=[rules])

    extraction, _ = extract("Dave runs Ledger.", graph_schema)

    assert extraction.relations == ()
    assert [i.code for i in extraction.issues] == ["UNRESOLVED_ENDPOINT"]
    assert "['Person', 'Team']" in extraction.issues[0].message


def test_evidence_is_capped_at_the_first_mentions() -> None:
    text = " ".join(["Carol."] * (MAX_EVIDENCE + 5))

    extraction, _ = extract(text)

    (carol,) = extraction.entities
    assert len(carol.evidence) == MAX_EVIDENCE
    assert carol.evidence[0].start == 0


def test_extraction_is_deterministic_and_the_identity_hashes_the_rules() -> None:
    text = "Bob is a member of Payments. Payments owns Ledger."
    first, _ = extract(text)
    again, _ = extract(text)
    base = RulesExtractor(schema()).identity()
    changed = RulesExtractor(schema(relations=SCHEMA["extraction"]["rules"]["relations"][:1]))

    assert first == again
    assert base == RulesExtractor(schema()).identity()
    assert changed.identity() != base
    assert set(base) == {"engine", "rules"}


def test_the_example_schema_loads_and_extracts() -> None:
    example = load_graph_schema(EXAMPLE)
    text = (
        "Alice Chen leads the Payments Team. Bob is a member of the Payments Team.\n\n"
        "The Ledger Service depends on the Billing API. Bob works on Project Atlas."
    )
    chunks = chunk_document("doc", text, max_chars=400)

    extraction = RulesExtractor(example).extract(chunks, example)

    assert relations(extraction) == {
        ("Alice Chen", "LEADS", "Payments Team"),
        ("Bob Stone", "MEMBER_OF", "Payments Team"),
        ("Ledger Service", "DEPENDS_ON", "Billing API"),
        ("Bob Stone", "WORKS_ON", "Project Atlas"),
    }
    assert_evidence_exact(text, extraction, list(chunks))


def test_another_schema_version_is_refused_at_extraction() -> None:
    extractor = RulesExtractor(schema())
    other = parse_graph_schema({**copy.deepcopy(SCHEMA), "version": "2"})

    with pytest.raises(ExtractionFailed, match="compiled for graph schema '1'") as raised:
        extractor.extract([], other)
    assert raised.value.code is StatusCode.FAILED_PRECONDITION


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"entities": {"Robot": ["R2"]}}, r"extraction\.rules\.entities\.Robot: not a node type"),
        (
            {"entities": {"Person": [{"name": "Bob", "aliases": ["he"]}]}},
            r"extraction\.rules\.entities\.Person\.0\.aliases: 'he' cannot name an entity",
        ),
        (
            {"entities": {"Person": ["Bob", "BOB"]}},
            r"entities\.Person\.1\.name: 'BOB' already names Person 'Bob'",
        ),
        (
            {"entities": {"System": [{"name": "X", "properties": {"tier": "gold"}}]}},
            r"entities\.System\.0\.properties: property 'tier': 'gold' is not one of",
        ),
        ({"entities": {"Person": [{"nom": "X"}]}}, r"extraction\.rules\.entities\.Person\.0\.nom"),
        ({"relations": [{"type": "HATES", "pattern": "{source} x {target}"}]}, r"0\.type"),
        (
            {"relations": [{"type": "OWNS", "pattern": "{source} x {target}", "source": ["Team"]}]}
            | {"entities": {"Person": ["Bob"], "System": ["Ledger"]}},
            r"relations\.0\.pattern: the gazetteer has no names of the source types",
        ),
        (
            {"relations": [{"type": "OWNS", "pattern": "{source} x", "target": ["Person"]}]},
            r"relations\.0\.target: OWNS does not allow \['Person'\]",
        ),
        ({"relations": [{"type": "OWNS", "pattern": "{source} x"}]}, r"\{source\} and \{target\}"),
        ({"relations": [{"type": "OWNS", "regex": "(?P<source>a"}]}, r"relations\.0\.regex"),
        (
            {"relations": [{"type": "OWNS", "regex": "(?P<source>a) b"}]},
            r"relations\.0\.regex: needs the named groups \['target'\]",
        ),
        (
            {"relations": [{"type": "OWNS", "pattern": "{source} {target}", "regex": "x"}]},
            r"relations\.0: .*either pattern or regex",
        ),
    ],
)
def test_a_bad_rule_set_is_refused_naming_its_path(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphSchemaError, match=message):
        RulesExtractor(schema(**changes))


def test_a_schema_without_rules_is_refused() -> None:
    document = copy.deepcopy(SCHEMA)
    del document["extraction"]

    with pytest.raises(GraphSchemaError, match=r"extraction\.rules: missing"):
        RulesExtractor(parse_graph_schema(document))
