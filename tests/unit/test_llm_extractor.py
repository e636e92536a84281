"""The llm extractor against a local chat-completions server (tests/fake_chat_server.py)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import pytest
from pydantic import SecretStr

from graph_ingest.domain.candidates import Chunk, EntityCandidate, Extraction, RelationCandidate
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.status import StatusCode
from graph_ingest.planning.errors import ExtractionFailed
from graph_ingest.planning.graph_schema import parse_graph_schema
from graph_ingest.planning.llm import LlmExtractor
from graph_ingest.planning.llm_prompt import Prompt
from graph_ingest.settings import Settings
from graph_ingest.settings.llm import LlmSettings
from tests.fake_chat_server import (
    PATH,
    Answer,
    FakeChatServer,
    completion,
    json_completion,
    running_fake_chat_server,
    status,
)

pytestmark = pytest.mark.timeout(30)

KEY = "sk-test-5f1b0c9e-never-shown"
SCHEMA = parse_graph_schema(
    {
        "version": "2026-01",
        "node_types": {
            "Person": {
                "properties": {
                    "role": {"type": "string"},
                    "status": {"type": "string", "enum": ["active", "retired"]},
                }
            },
            "System": {},
        },
        "relation_types": {
            "OWNS": {
                "sources": ["Person"],
                "targets": ["System"],
                "properties": {"since": {"type": "integer", "required": True}},
            }
        },
    }
)
FIRST = "Ada Lovelace owns the Ledger system since 2019."
SECOND = "Grace Hopper, now retired, owns Compiler."
DOCUMENT = f"{FIRST}\n\n{SECOND}"
CHUNKS = (
    Chunk(chunk_id="c1", start=0, end=len(FIRST), text=FIRST),
    Chunk(chunk_id="c2", start=len(FIRST) + 2, end=len(DOCUMENT), text=SECOND),
)


class Sleeps:
    """An injected sleep: records what the extractor waited, waits nothing."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with running_fake_chat_server() as fake:
        yield fake


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def settings_for(server: FakeChatServer, **overrides: Any) -> LlmSettings:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "model-a",
        "api_key": SecretStr(KEY),
        "max_attempts": 3,
        "initial_backoff_s": 0.5,
        "max_backoff_s": 30.0,
        "timeout_s": 5.0,
    }
    return LlmSettings(**(values | overrides))


def extractor_for(
    server: FakeChatServer, sleeps: Sleeps, clock: float = 0.0, **overrides: Any
) -> LlmExtractor:
    return LlmExtractor(settings_for(server, **overrides), sleep=sleeps, clock=lambda: clock)


def entity(segment: str, type_: str, name: str, *quotes: str, **properties: Any) -> dict[str, Any]:
    return {
        "segment": segment,
        "type": type_,
        "name": name,
        "aliases": [],
        "properties": properties,
        "confidence": 0.9,
        "quotes": list(quotes),
    }


def owns(segment: str, person: str, system: str, since: int, *quotes: str) -> dict[str, Any]:
    return {
        "segment": segment,
        "type": "OWNS",
        "source": {"type": "Person", "name": person},
        "target": {"type": "System", "name": system},
        "properties": {"since": since},
        "confidence": 0.8,
        "quotes": list(quotes),
    }


def answer(*entities: dict[str, Any], relations: tuple[dict[str, Any], ...] = ()) -> Answer:
    return json_completion({"entities": list(entities), "relations": list(relations)})


def evidence_spans(extraction: Extraction) -> list[tuple[str, str, int, int]]:
    candidates: list[EntityCandidate | RelationCandidate] = [
        *extraction.entities,
        *extraction.relations,
    ]
    return [(e.chunk_id, e.quote, e.start, e.end) for c in candidates for e in c.evidence]


# --- valid answers -------------------------------------------------------------------------------


def test_a_valid_answer_gives_candidates_whose_evidence_offsets_are_exact(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    # Given one request for both chunks, answered with candidates of each
    server.script(
        answer(
            entity("s1", "Person", "Ada Lovelace", "Ada Lovelace", role=None, status=None),
            entity("s1", "System", "Ledger", "the Ledger system"),
            # "owns" is in both chunks: the one of s2 must be located in chunk c2
            entity("s2", "Person", "Grace Hopper", "Grace Hopper", "owns", status="retired"),
            relations=(owns("s2", "Grace Hopper", "Compiler", 1952, "owns Compiler"),),
        )
    )

    # When
    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS, SCHEMA)

    # Then every evidence quotes the document at its offsets, in the chunk it names
    spans = evidence_spans(extraction)
    assert [(c, q) for c, q, _, _ in spans] == [
        ("c1", "Ada Lovelace"),
        ("c1", "the Ledger system"),
        ("c2", "Grace Hopper"),
        ("c2", "owns"),
        ("c2", "owns Compiler"),
    ]
    for chunk_id, quote, start, end in spans:
        assert DOCUMENT[start:end] == quote
        chunk = next(c for c in CHUNKS if c.chunk_id == chunk_id)
        assert chunk.start <= start < end <= chunk.end
    ada, ledger, grace = extraction.entities
    assert (ledger.entity_type, ledger.name) == ("System", "Ledger")
    assert (ada.entity_type, ada.name, ada.properties) == ("Person", "Ada Lovelace", {})
    assert (grace.properties, grace.confidence) == ({"status": "retired"}, 0.9)
    (relation,) = extraction.relations
    assert (relation.relation_type, relation.source.name, relation.target.name) == (
        "OWNS",
        "Grace Hopper",
        "Compiler",
    )
    assert relation.properties == {"since": 1952}
    assert extraction.issues == ()


def test_the_request_carries_the_model_the_key_and_a_schema_derived_from_the_graph_schema(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(answer())

    LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS, SCHEMA)

    (request,) = server.received
    assert request.path == PATH
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(request.body)
    assert request.body["model"] == "model-a"
    assert request.body["max_tokens"] == LlmSettings().max_output_tokens
    assert [s["text"] for s in request.segments] == [FIRST, SECOND]
    schema = request.body["response_format"]["json_schema"]["schema"]
    person, system = schema["properties"]["entities"]["items"]["anyOf"]
    assert person["properties"]["type"]["enum"] == ["Person"]
    assert person["properties"]["properties"]["properties"]["status"] == {
        "type": ["string", "null"],
        "enum": ["active", "retired", None],
    }
    assert system["properties"]["properties"]["properties"] == {}
    (relation,) = schema["properties"]["relations"]["items"]["anyOf"]
    assert relation["properties"]["source"]["properties"]["type"]["enum"] == ["Person"]
    assert relation["properties"]["target"]["properties"]["type"]["enum"] == ["System"]
    assert relation["properties"]["properties"]["properties"]["since"] == {"type": "integer"}
    assert relation["properties"]["properties"]["required"] == ["since"]


def test_no_key_no_authorization_header(server: FakeChatServer, sleeps: Sleeps) -> None:
    server.script(answer())

    LlmExtractor(settings_for(server, api_key=None), sleep=sleeps).extract(CHUNKS, SCHEMA)

    assert "Authorization" not in server.received[0].headers


def test_chunks_without_text_are_not_sent(server: FakeChatServer, sleeps: Sleeps) -> None:
    blank = Chunk(chunk_id="b", start=0, end=3, text=" \n ")

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract([blank], SCHEMA)

    assert extraction == Extraction()
    assert server.received == []


# --- what cannot be read -------------------------------------------------------------------------

MODEL_SECRET_TEXT = "UNIQUE-MODEL-OUTPUT-7731"


def test_malformed_json_is_a_recorded_issue_and_the_other_chunks_are_still_extracted(
    server: FakeChatServer, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(
        completion(f'{{"entities": [{MODEL_SECRET_TEXT}'),
        answer(entity("s1", "Person", "Grace Hopper", "Grace Hopper")),
    )

    extraction = extractor_for(server, sleeps, chunks_per_request=1).extract(CHUNKS, SCHEMA)

    (issue,) = extraction.issues
    assert (issue.code, issue.chunk_id) == ("MALFORMED_OUTPUT", "c1")
    assert "not JSON" in issue.message and "at character 14" in issue.message
    assert MODEL_SECRET_TEXT not in issue.message
    assert [e.name for e in extraction.entities] == ["Grace Hopper"]
    assert extraction.entities[0].evidence[0].chunk_id == "c2"
    assert MODEL_SECRET_TEXT not in caplog.text


def test_an_item_that_does_not_match_the_schema_costs_that_item_only(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    broken = {"segment": "s2", "type": "Person", "quotes": [MODEL_SECRET_TEXT]}  # no name
    bad_type = entity("s1", "Not a type!", MODEL_SECRET_TEXT, "Ada Lovelace")
    server.script(answer(broken, bad_type, entity("s1", "Person", "Ada Lovelace", "Ada Lovelace")))

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS, SCHEMA)

    assert [e.name for e in extraction.entities] == ["Ada Lovelace"]
    assert [(i.code, i.chunk_id) for i in extraction.issues] == [
        ("MALFORMED_OUTPUT", "c2"),
        ("MALFORMED_OUTPUT", "c1"),
    ]
    assert "entities[0]" in extraction.issues[0].message
    assert "name" in extraction.issues[0].message
    assert "entities[1]" in extraction.issues[1].message
    assert all(MODEL_SECRET_TEXT not in i.message for i in extraction.issues)


@pytest.mark.parametrize(
    "document",
    [[], {"entities": "many"}, {"entities": [entity("s9", "Person", "Ada", "Ada")]}],
    ids=["not-an-object", "entities-not-a-list", "unknown-segment"],
)
def test_an_answer_that_cannot_be_placed_is_an_issue_on_every_chunk_of_its_request(
    server: FakeChatServer, sleeps: Sleeps, document: Any
) -> None:
    server.script(json_completion(document))

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS, SCHEMA)

    assert extraction.entities == ()
    assert [(i.code, i.chunk_id) for i in extraction.issues] == [
        ("MALFORMED_OUTPUT", "c1"),
        ("MALFORMED_OUTPUT", "c2"),
    ]


def test_a_quote_not_in_its_chunk_is_an_issue_and_a_candidate_without_evidence_is_dropped(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(
        answer(
            # in the document, but in the other chunk
            entity("s1", "Person", "Grace Hopper", "Grace Hopper"),
            entity("s1", "Person", "Ada Lovelace", "Ada Lovelace", "Ada was invented here"),
        )
    )

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS, SCHEMA)

    (ada,) = extraction.entities
    assert [e.quote for e in ada.evidence] == ["Ada Lovelace"]
    assert [(i.code, i.chunk_id) for i in extraction.issues] == [
        ("QUOTE_NOT_IN_CHUNK", "c1"),
        ("QUOTE_NOT_IN_CHUNK", "c1"),
    ]
    assert "dropped" in extraction.issues[0].message
    assert "1 of its 2 quotes" in extraction.issues[1].message


def test_a_truncated_answer_says_the_model_hit_its_token_limit(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(completion('{"entities": [', finish_reason="length"))

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS[:1], SCHEMA)

    (issue,) = extraction.issues
    assert "max_tokens" in issue.message


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (completion("x" * 5_000), "exceeds 2048 bytes"),
        (
            completion(None, finish_reason="content_filter"),
            "no text (finish_reason content_filter)",
        ),
    ],
    ids=["too-large", "no-content"],
)
def test_an_unusable_reply_is_an_issue_not_a_retry(
    server: FakeChatServer, sleeps: Sleeps, reply: Answer, expected: str
) -> None:
    server.script(reply)

    extraction = extractor_for(server, sleeps, max_response_bytes=2048).extract(CHUNKS[:1], SCHEMA)

    (issue,) = extraction.issues
    assert (issue.code, issue.chunk_id) == ("MALFORMED_OUTPUT", "c1")
    assert expected in issue.message
    assert len(server.received) == 1


# --- transient failures and retries --------------------------------------------------------------


def test_429_with_retry_after_waits_that_long_then_succeeds(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(
        status(429, headers={"Retry-After": "1"}),
        answer(entity("s1", "Person", "Ada Lovelace", "Ada Lovelace")),
    )

    extraction = extractor_for(server, sleeps).extract(CHUNKS[:1], SCHEMA)

    assert sleeps.delays == [1.0]
    assert len(server.received) == 2
    assert [e.name for e in extraction.entities] == ["Ada Lovelace"]


def test_retry_after_as_an_http_date_is_read_against_the_clock_and_capped(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    due = parsedate_to_datetime("Wed, 21 Oct 2026 07:28:00 GMT")
    server.script(
        status(503, headers={"Retry-After": format_datetime(due, usegmt=True)}),
        status(429, headers={"Retry-After": "3600"}),
        answer(),
    )

    extractor_for(server, sleeps, clock=due.timestamp() - 7).extract(CHUNKS[:1], SCHEMA)

    assert sleeps.delays == [7.0, 30.0]


def test_5xx_past_the_attempt_budget_fails_unavailable_with_backoff_between_tries(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(status(500), status(502), status(503, headers={"Retry-After": "2"}))

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps).extract(CHUNKS, SCHEMA)

    assert failure.value.code is StatusCode.UNAVAILABLE
    assert failure.value.retry_after_s == 2.0
    assert "HTTP 503" in str(failure.value) and "after 3 attempts" in str(failure.value)
    assert len(server.received) == 3
    first, second = sleeps.delays
    assert 0.25 <= first <= 0.5 and 0.5 <= second <= 1.0


def test_429_past_the_attempt_budget_fails_resource_exhausted(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(status(429), status(429, headers={"Retry-After": "4"}))

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps, max_attempts=2).extract(CHUNKS, SCHEMA)

    assert failure.value.code is StatusCode.RESOURCE_EXHAUSTED
    assert failure.value.retry_after_s == 4.0


def test_a_slow_endpoint_fails_deadline_exceeded(server: FakeChatServer, sleeps: Sleeps) -> None:
    server.script(Answer(delay_s=10.0))

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps, timeout_s=0.2, max_attempts=1).extract(CHUNKS, SCHEMA)

    assert failure.value.code is StatusCode.DEADLINE_EXCEEDED
    assert "ReadTimeout" in str(failure.value)


def test_a_refused_connection_fails_unavailable(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = LlmSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_attempts=2)

    with pytest.raises(ExtractionFailed) as failure:
        LlmExtractor(settings, sleep=sleeps).extract(CHUNKS, SCHEMA)

    assert failure.value.code is StatusCode.UNAVAILABLE
    assert "ConnectError" in str(failure.value)
    assert len(sleeps.delays) == 1


def test_a_2xx_that_is_not_a_chat_completion_is_retried(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    server.script(Answer(body=b"<html>gateway</html>"), answer())

    extraction = extractor_for(server, sleeps).extract(CHUNKS, SCHEMA)

    assert extraction == Extraction()
    assert len(server.received) == 2


def test_a_schema_problem_under_a_key_the_model_made_up_does_not_quote_the_key(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    made_up = entity("s1", "Person", "Ada Lovelace", "Ada Lovelace")
    made_up["properties"] = {f"{MODEL_SECRET_TEXT} key": {"nested": "object"}}
    server.script(answer(made_up))

    extraction = LlmExtractor(settings_for(server), sleep=sleeps).extract(CHUNKS[:1], SCHEMA)

    (issue,) = extraction.issues
    assert "entities[0] does not match the schema: properties.<key>" in issue.message
    assert MODEL_SECRET_TEXT not in issue.message


# --- permanent failures --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("http_status", "code"),
    [
        (400, StatusCode.INVALID_ARGUMENT),
        (401, StatusCode.UNAUTHENTICATED),
        (403, StatusCode.PERMISSION_DENIED),
        (404, StatusCode.NOT_FOUND),
        (422, StatusCode.INVALID_ARGUMENT),
    ],
)
def test_a_refused_request_fails_at_once_with_its_permanent_code(
    server: FakeChatServer, sleeps: Sleeps, http_status: int, code: StatusCode
) -> None:
    server.script(
        status(
            http_status,
            body={"error": {"message": f"bad key {KEY} {MODEL_SECRET_TEXT}", "code": "bad_thing"}},
        )
    )

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps).extract(CHUNKS, SCHEMA)

    assert failure.value.code is code
    assert not failure.value.code.is_transient
    assert f"HTTP {http_status}: bad_thing" in str(failure.value)
    assert KEY not in str(failure.value) and MODEL_SECRET_TEXT not in str(failure.value)
    assert len(server.received) == 1
    assert sleeps.delays == []


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"code": f"{MODEL_SECRET_TEXT} was sent"}},
        {"error": {"message": "x" * 100_000, "code": "too_long_to_read"}},
    ],
    ids=["free-text-code", "huge-error-body"],
)
def test_an_error_code_that_is_free_text_or_past_the_read_bound_is_not_shown(
    server: FakeChatServer, sleeps: Sleeps, body: dict[str, Any]
) -> None:
    server.script(status(400, body=body))

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps).extract(CHUNKS, SCHEMA)

    assert str(failure.value).endswith("/v1/chat/completions: HTTP 400")


# --- secrets -------------------------------------------------------------------------------------


def test_the_key_never_appears_in_logs_settings_or_errors(
    server: FakeChatServer,
    sleeps: Sleeps,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("GRAPH_INGEST_LLM__API_KEY", KEY)
    monkeypatch.setenv("GRAPH_INGEST_LLM__BASE_URL", server.base_url)
    monkeypatch.setenv("GRAPH_INGEST_LLM__MODEL", "model-a")
    settings = Settings().llm
    assert settings.api_key is not None and settings.api_key.get_secret_value() == KEY
    server.script(status(503), status(401, body={"error": {"message": KEY}}))

    with pytest.raises(ExtractionFailed) as failure:
        LlmExtractor(settings, sleep=sleeps).extract(CHUNKS, SCHEMA)

    assert server.received[0].headers["Authorization"] == f"Bearer {KEY}"
    assert caplog.records, "the retry was logged"
    for text in (caplog.text, repr(settings), str(settings), repr(Settings()), str(failure.value)):
        assert KEY not in text


# --- bounds --------------------------------------------------------------------------------------


def test_no_request_exceeds_the_prompt_bound_and_a_large_chunk_is_sent_in_pieces(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    # Given a chunk far larger than one request allows, with characters JSON escapes
    words = [f'w{i}"\n' if i % 7 == 0 else f"word{i}" for i in range(800)]
    text = " ".join(words)
    big = Chunk(chunk_id="big", start=5, end=5 + len(text), text=text)
    bound = len(Prompt.for_schema(SCHEMA).system) + 900
    last_word = words[-1]
    server.responder = lambda request: (
        answer(entity(request.segments[-1]["segment"], "Person", "w", last_word))
        if last_word in request.segments[-1]["text"]
        else answer()
    )

    # When
    extraction = extractor_for(server, sleeps, max_prompt_chars=bound).extract([big], SCHEMA)

    # Then every request is within the bound and the pieces are the chunk, in order
    assert len(server.received) > 3
    assert all(r.prompt_chars <= bound for r in server.received)
    pieces = [s["text"] for r in server.received for s in r.segments]
    assert "".join(pieces) == text
    assert all(piece[-1] in " \n" for piece in pieces[:-1]), "cut at whitespace"
    (evidence,) = extraction.entities[0].evidence
    assert (evidence.chunk_id, evidence.start) == ("big", 5 + text.rindex(last_word))


def test_at_most_chunks_per_request_chunks_go_in_one_request(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    chunks = [Chunk(chunk_id=f"c{i}", start=i * 10, end=i * 10 + 5, text="hello") for i in range(5)]
    server.responder = lambda request: answer()

    extractor_for(server, sleeps, chunks_per_request=2).extract(chunks, SCHEMA)

    assert [len(r.segments) for r in server.received] == [2, 2, 1]


def test_a_prompt_bound_the_graph_schema_alone_fills_fails_before_any_request(
    server: FakeChatServer, sleeps: Sleeps
) -> None:
    bound = len(Prompt.for_schema(SCHEMA).system) + 100

    with pytest.raises(ExtractionFailed) as failure:
        extractor_for(server, sleeps, max_prompt_chars=bound).extract(CHUNKS, SCHEMA)

    assert failure.value.code is StatusCode.FAILED_PRECONDITION
    assert "GRAPH_INGEST_LLM__MAX_PROMPT_CHARS" in str(failure.value)
    assert server.received == []


# --- identity and configuration ------------------------------------------------------------------


def test_the_model_id_is_part_of_the_identity(server: FakeChatServer, sleeps: Sleeps) -> None:
    a = extractor_for(server, sleeps).identity()

    assert a == extractor_for(server, sleeps).identity()
    assert a["extractor"] == "llm" and a["prompt_version"]
    assert extractor_for(server, sleeps, model="model-b").identity() != a
    # the endpoint is not: the same model behind another host extracts the same
    other_host = LlmSettings(base_url="http://other.invalid/v1", model="model-a")
    assert LlmExtractor(other_host).identity() == a


def test_the_prompt_version_is_part_of_the_identity(
    server: FakeChatServer, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = extractor_for(server, sleeps).identity()
    monkeypatch.setattr("graph_ingest.planning.llm.PROMPT_VERSION", "next")

    assert extractor_for(server, sleeps).identity() == before | {"prompt_version": "next"}


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"model": "m"}, "GRAPH_INGEST_LLM__BASE_URL"),
        ({"base_url": "http://h/v1"}, "GRAPH_INGEST_LLM__MODEL"),
        ({"base_url": "h/v1", "model": "m"}, "GRAPH_INGEST_LLM__BASE_URL"),
        ({"base_url": f"http://u:{KEY}@h/v1", "model": "m"}, "GRAPH_INGEST_LLM__API_KEY"),
    ],
    ids=["no-base-url", "no-model", "no-scheme", "credentials-in-url"],
)
def test_a_missing_or_unusable_setting_fails_at_construction_naming_its_variable(
    values: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named) as failure:
        LlmExtractor(LlmSettings(**values))

    assert KEY not in str(failure.value)
