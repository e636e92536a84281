"""Ingest requests read from what ``graph-ingest submit`` is given: a text file, stdin, a
directory of documents, or a JSONL file of requests. Every error names the file (and line) and
the field, without quoting the document."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.ids import content_hash
from graph_ingest.domain.request import IngestOptions, IngestRequest, StaleRelationPolicy
from graph_ingest.domain.status import StatusCode

JSONL_SUFFIX = ".jsonl"


class RequestInputError(GraphIngestError):
    """Input that does not make valid ingest requests; nothing was sent."""

    code = StatusCode.INVALID_ARGUMENT


@dataclass(frozen=True, slots=True)
class RequestDefaults:
    """What the command line says for the requests it builds (a JSONL line may say otherwise)."""

    space: str | None
    document_id: str | None
    document_version: str | None
    schema_version: str
    stale_relation_policy: StaleRelationPolicy
    batch_id: str | None = None
    source_updated_at: datetime | None = None

    @staticmethod
    def build(factory: Callable[[], IngestRequest], *, where: str) -> IngestRequest:
        """``factory()``; RequestInputError naming ``where`` and every invalid field."""
        try:
            return factory()
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(request)'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)[:5]
            )
            raise RequestInputError(f"{where}: invalid ingest request: {problems}") from None

    def text_request(self, document_id: str, text: str, *, where: str) -> IngestRequest:
        space = self.space
        if space is None:
            raise RequestInputError(f"{where}: --space is required for a text document")
        return self.build(
            lambda: IngestRequest(
                space=space,
                document_id=document_id,
                document_version=self.document_version or content_hash(text),
                schema_version=self.schema_version,
                content=text,
                batch_id=self.batch_id,
                source_updated_at=self.source_updated_at,
                options=IngestOptions(stale_relation_policy=self.stale_relation_policy),
            ),
            where=where,
        )

    def line_request(self, fields: dict[str, Any], *, where: str) -> IngestRequest:
        filled: dict[str, Any] = {"schema_version": self.schema_version, **fields}
        if self.space is not None:
            filled.setdefault("space", self.space)
        if self.batch_id is not None:
            filled.setdefault("batch_id", self.batch_id)
        if self.source_updated_at is not None:
            filled.setdefault("source_updated_at", self.source_updated_at)
        return self.build(lambda: IngestRequest.model_validate(filled), where=where)


def read_requests(source: Path, defaults: RequestDefaults, *, stdin: TextIO) -> list[IngestRequest]:
    """The requests ``source`` holds (``-``: ``stdin`` is one document)."""
    if str(source) == "-":
        if defaults.document_id is None:
            raise RequestInputError("stdin: --document-id is required")
        return [defaults.text_request(defaults.document_id, stdin.read(), where="stdin")]
    if source.is_dir():
        if defaults.document_id is not None:
            raise RequestInputError(
                f"{source}: --document-id names one document; a directory's documents are "
                "named by their paths"
            )
        files = sorted(p for p in source.rglob("*") if p.is_file())
        if not files:
            raise RequestInputError(f"{source}: the directory holds no files")
        return [
            defaults.text_request(path.relative_to(source).as_posix(), _text(path), where=str(path))
            for path in files
        ]
    if source.suffix == JSONL_SUFFIX:
        return _jsonl(source, defaults)
    document_id = defaults.document_id or source.name
    return [defaults.text_request(document_id, _text(source), where=str(source))]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RequestInputError(
            f"{path}: not UTF-8 text (byte {exc.start}): convert it first"
        ) from None
    except OSError as exc:
        raise RequestInputError(f"{path}: cannot read: {exc.strerror}") from None


def _jsonl(path: Path, defaults: RequestDefaults) -> list[IngestRequest]:
    if defaults.document_id is not None:
        raise RequestInputError(f"{path}: --document-id cannot apply to a file of requests")
    requests = []
    for number, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RequestInputError(
                f"{where}: invalid JSON at column {exc.colno}: {exc.msg}"
            ) from None
        if not isinstance(fields, dict):
            raise RequestInputError(
                f"{where}: expected a JSON object, found {type(fields).__name__}"
            )
        requests.append(defaults.line_request(fields, where=where))
    if not requests:
        raise RequestInputError(f"{path}: no requests in the file")
    return requests


__all__ = ["JSONL_SUFFIX", "RequestDefaults", "RequestInputError", "read_requests"]
