"""Reading what `graph-ingest submit` is given into ingest requests, with errors that name it."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.request import StaleRelationPolicy
from graph_ingest.producers.request_files import RequestDefaults, RequestInputError, read_requests

pytestmark = pytest.mark.timeout(30)

DEFAULTS = RequestDefaults(
    space="kb",
    document_id=None,
    document_version=None,
    schema_version="s1",
    stale_relation_policy=StaleRelationPolicy.KEEP,
)
NO_STDIN = io.StringIO("")


def with_(**changes: object) -> RequestDefaults:
    return replace(DEFAULTS, **changes)  # type: ignore[arg-type]


def test_a_text_file_is_one_document_named_by_the_file_or_the_option(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Alice met Bob.", encoding="utf-8")

    (named_by_file,) = read_requests(path, DEFAULTS, stdin=NO_STDIN)
    (named,) = read_requests(path, with_(document_id="n-1", document_version="7"), stdin=NO_STDIN)

    assert (named_by_file.space, named_by_file.document_id) == ("kb", "notes.txt")
    assert named_by_file.document_version == content_hash("Alice met Bob.")
    assert named_by_file.options.stale_relation_policy is StaleRelationPolicy.KEEP
    assert (named.document_id, named.document_version) == ("n-1", "7")


def test_stdin_needs_a_document_id() -> None:
    (request,) = read_requests(Path("-"), with_(document_id="d"), stdin=io.StringIO("text"))
    assert request.content == "text"
    with pytest.raises(RequestInputError, match="stdin: --document-id is required"):
        read_requests(Path("-"), DEFAULTS, stdin=io.StringIO("text"))


def test_a_directory_is_one_document_per_file_named_by_its_relative_path(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.txt").write_text("One.")
    (tmp_path / "two.md").write_text("Two.")

    requests = read_requests(tmp_path, DEFAULTS, stdin=NO_STDIN)

    assert [(r.document_id, r.content) for r in requests] == [
        ("a/one.txt", "One."),
        ("two.md", "Two."),
    ]
    with pytest.raises(RequestInputError, match="a directory's documents are named by their paths"):
        read_requests(tmp_path, with_(document_id="x"), stdin=NO_STDIN)


def test_a_jsonl_file_is_many_requests_the_options_filling_in(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    lines = [
        {"document_id": "d1", "document_version": "1", "content": "One."},
        {
            "space": "other",
            "document_id": "d2",
            "document_version": "2",
            "content": "Two.",
            "schema_version": "s9",
            "options": {"stale_relation_policy": "DELETE_IF_UNREFERENCED"},
        },
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")

    first, second = read_requests(path, DEFAULTS, stdin=NO_STDIN)

    assert (first.space, first.schema_version) == ("kb", "s1")
    assert (second.space, second.schema_version) == ("other", "s9")


def test_the_source_time_of_the_command_line_fills_in_what_a_line_leaves_out(
    tmp_path: Path,
) -> None:
    # Given a text file, and a JSONL file where one line gives its own source time
    given = datetime(2026, 12, 1, 10, 30, tzinfo=timezone(timedelta(hours=1)))
    own = "2026-11-30T08:00:00+00:00"
    text = tmp_path / "notes.txt"
    text.write_text("Alice met Bob.", encoding="utf-8")
    lines = tmp_path / "requests.jsonl"
    line = {"document_id": "d", "document_version": "1", "content": "x"}
    lines.write_text(f"{json.dumps(line)}\n{json.dumps({**line, 'source_updated_at': own})}\n")
    defaults = with_(source_updated_at=given)

    # When they are read with --source-updated-at
    (from_text,) = read_requests(text, defaults, stdin=NO_STDIN)
    left_out, own_time = read_requests(lines, defaults, stdin=NO_STDIN)

    # Then the text document and the line without one carry it; the other keeps its own
    assert from_text.source_updated_at == given == datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert left_out.source_updated_at == given
    assert own_time.source_updated_at == datetime.fromisoformat(own)
    assert read_requests(text, DEFAULTS, stdin=NO_STDIN)[0].source_updated_at is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"document_id": "d1"\n', r"requests.jsonl:1: invalid JSON at column"),
        ("[1, 2]\n", r"requests.jsonl:1: expected a JSON object, found list"),
        (
            '{"document_id": "d1", "document_version": "1", "content": "a\\u0000b"}\n',
            r"requests.jsonl:1: invalid ingest request: content: String should match pattern",
        ),
        (
            '{"space": "not valid", "document_id": "d", "document_version": "1", "content": "x"}\n',
            r"requests.jsonl:1: invalid ingest request: space",
        ),
        ("\n", r"no requests in the file"),
    ],
)
def test_a_malformed_line_is_an_error_naming_the_line(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(content)

    with pytest.raises(RequestInputError, match=message) as caught:
        read_requests(path, DEFAULTS, stdin=NO_STDIN)

    assert "a\x00b" not in str(caught.value)


def test_a_file_that_is_not_utf8_or_holds_nul_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\xff\xfe")
    nul = tmp_path / "nul.txt"
    nul.write_text("a\x00b")

    with pytest.raises(RequestInputError, match=r"image\.png: not UTF-8 text"):
        read_requests(binary, DEFAULTS, stdin=NO_STDIN)
    with pytest.raises(RequestInputError, match=r"nul\.txt: invalid ingest request: content"):
        read_requests(nul, DEFAULTS, stdin=NO_STDIN)


def test_a_text_document_needs_a_space(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("x")
    with pytest.raises(RequestInputError, match="--space is required"):
        read_requests(path, with_(space=None), stdin=NO_STDIN)
